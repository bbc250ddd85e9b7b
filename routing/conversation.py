"""The conversation intents, answered from the session Flywheel keeps.

``summarize`` turns the session's last answers into a question for a flow;
``conversation-query`` is answered here, from the stored turns, without
asking any backend (the backends each saw only part of the conversation).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from routing.sessions import PastTurn

SUMMARIZE_LAST = 3
_FIRST = re.compile(r"\bfirst\b", re.IGNORECASE)
_LAST = re.compile(r"\b(last|previous|earlier|before)\b", re.IGNORECASE)
_ANSWER = re.compile(
    r"\b(answer|answered|repl(y|ied)|you (say|said|tell|told|mean|meant))\b", re.IGNORECASE
)


def summarize_question(answers: Sequence[str], request: str) -> str:
    """The question a flow receives for ``summarize``: the answers to condense, and the
    user's own words ("in bullet points please"), which may say how."""
    numbered = "\n\n".join(f"Answer {i}:\n{text}" for i, text in enumerate(answers, 1))
    return (
        f"Summarize these answers from our conversation:\n\n{numbered}\n\n"
        f"The request, in the user's words: {request}"
    )


def answer_from_history(question: str, turns: Sequence[PastTurn]) -> str:
    """Answer a question about the conversation itself from its turns (oldest first)."""
    if not turns:
        return "We have not talked about anything yet in this conversation."
    about_answers = bool(_ANSWER.search(question))
    if _FIRST.search(question):
        first = turns[0]
        return (
            f"My first answer was: {first.answer}"
            if about_answers
            else f"Your first question was: {first.question}"
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
