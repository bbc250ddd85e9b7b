"""The conversation intents, answered from the session Flywheel keeps.

``summarize`` turns the session's last answers into a question for a flow;
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
