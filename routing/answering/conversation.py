"""The conversation intents, answered from the session Flywheel keeps.

``summarize`` condenses either the conversation or content the user gives or
points to (an article, a report, a thread: summarizes_conversation tells
which); for the conversation, the session's last answers become the question
for a flow, and content goes to the flow as the user wrote it;
``conversation-query`` is answered here, from the stored turns, without
asking any backend (the backends each saw only part of the conversation):
by the LLM reading the transcript when one is configured (seed 001), else
by the rules below, which find the turn asked about ("my second question",
"your last answer").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from backends.adapters.base import Exchange
from routing.answering.sessions import PastTurn
from routing.classification import llm
from routing.recording.decision import clipped

SUMMARIZE_LAST = 3
TRANSCRIPT_CHARS = 8000
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
_NTH = re.compile(r"\b(?:(" + "|".join(_ORDINALS) + r")|(\d{1,3})(?:st|nd|rd|th))\b", re.IGNORECASE)
_LAST = re.compile(r"\b(last|previous|earlier|before)\b", re.IGNORECASE)
_ANSWER = re.compile(
    r"\b(answer|answered|repl(y|ied)|you (say|said|tell|told|mean|meant))\b", re.IGNORECASE
)


# What says a summary is of this conversation, or of something else the user gives.
_OF_CONVERSATION = re.compile(
    r"\b(our|this|the|whole) (conversation|chat|discussion|session|exchange|talk)\b"
    r"|\b(so far|up to now|above|earlier)\b"
    r"|\byou(?:'ve| have)? (said|told|suggested|listed|explained|recommended|wrote|"
    r"mentioned|gave|covered|proposed)\b"
    r"|\byour (last|previous|earlier|latest|answers?|explanations?|recommendations?|"
    r"suggestions?|responses?|advice|replies|points)\b"
    r"|\bwe(?:'ve| have)? (covered|discussed|talked|concluded|landed|figured|decided|agreed)\b"
    r"|\bback[- ]and[- ]forth\b",
    re.IGNORECASE,
)
_OF_CONTENT = re.compile(
    r"\b(article|report|paper|pdf|docs?|document|file|attachment|attached|e-?mails?|"
    r"thread|transcript|notes|minutes|text|post|page|book|chapter|essay|memo|whitepaper|"
    r"contract|policy|manual|spec|study|video|podcast|news|story|passage|paragraph|"
    r"below|following)\b|:\s*\S",
    re.IGNORECASE,
)
PASTED_CHARS = 400  # a question this long carries its own content


def summarizes_conversation(question: str, has_answers: bool) -> bool:
    """Whether ``summarize`` asks for this conversation's answers ("recap what we
    covered") rather than for content the user gives or points to ("TL;DR of this
    report", a pasted article): the words say so; when they do not, a bare "recap"
    means the conversation if it has answers."""
    if _OF_CONVERSATION.search(question):
        return True
    if len(question) > PASTED_CHARS or _OF_CONTENT.search(question):
        return False
    return has_answers


def exchanges_within(exchanges: Sequence[Exchange], budget: int) -> list[Exchange]:
    """The newest ``exchanges`` (given oldest first) whose questions and answers fit
    ``budget`` characters together, oldest first: the history a backend is sent. The
    oldest one kept may have its answer cut to use what is left."""
    kept: list[Exchange] = []
    left = budget
    for exchange in reversed(exchanges):
        cost = len(exchange.question) + len(exchange.answer)
        if cost > left:
            room = left - len(exchange.question)
            if room > 0 and exchange.answer:
                kept.append(Exchange(exchange.question, clipped(exchange.answer, room)))
            break
        kept.append(exchange)
        left -= cost
    return kept[::-1]


def answers_within(answers: Sequence[str], budget: int) -> list[str]:
    """The newest ``answers`` that fit ``budget`` characters together, as
    :func:`exchanges_within` keeps exchanges: what a summary is asked to condense."""
    return [e.answer for e in exchanges_within([Exchange("", a) for a in answers], budget)]


def summarize_question(answers: Sequence[str], request: str) -> str:
    """The question a flow receives for ``summarize``: the answers to condense, and the
    user's own words ("in bullet points please"), which may say how."""
    numbered = "\n\n".join(f"Answer {i}:\n{text}" for i, text in enumerate(answers, 1))
    return (
        f"Summarize these answers from our conversation:\n\n{numbered}\n\n"
        f"The request, in the user's words: {request}"
    )


async def answer_about_conversation(
    question: str, turns: Sequence[PastTurn], config: llm.LLMConfig | None
) -> str:
    """Answer a question about the conversation from its turns (oldest first): the
    LLM's reading of the transcript when ``config`` is given and it answers, else
    the rules' (answer_from_history)."""
    if config is not None and turns:
        answered = await llm.llm_conversation_answer(config, question, transcript(turns))
        if answered:
            return answered
    return answer_from_history(question, turns)


def transcript(turns: Sequence[PastTurn]) -> str:
    """The conversation as text, its most recent part when it is long."""
    lines = [f"User: {t.question}\nAssistant: {t.answer}" for t in turns]
    return "\n\n".join(lines)[-TRANSCRIPT_CHARS:]


def answer_from_history(question: str, turns: Sequence[PastTurn]) -> str:
    """Answer a question about the conversation itself from its turns (oldest first)."""
    if not turns:
        return "We have not talked about anything yet in this conversation."
    about_answers = bool(_ANSWER.search(question))
    nth = _NTH.search(question)
    if nth:
        word, number = nth.groups()
        position = _ORDINALS.index(word.lower()) + 1 if word else int(number)
        label = word.lower() if word else nth.group(0)
        if not 1 <= position <= len(turns):
            return f"This conversation has only {len(turns)} question(s) so far."
        turn = turns[position - 1]
        return (
            f"My {label} answer was: {turn.answer}"
            if about_answers
            else f"Your {label} question was: {turn.question}"
        )
    if _LAST.search(question):
        last = turns[-1]
        return (
            f"My previous answer was: {last.answer}"
            if about_answers
            else f"Your previous question was: {last.question}"
        )
    asked = "\n".join(f"{i}. {t.question}" for i, t in enumerate(turns, 1))
    return f"So far in this conversation you asked:\n{asked}"
