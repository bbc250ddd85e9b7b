"""Which summaries are of the conversation, and which of content the user gives."""

from __future__ import annotations

import pytest

from routing.answering.conversation import summarizes_conversation


@pytest.mark.parametrize(
    "question",
    [
        "summarize this conversation in bullet points",
        "can you condense what we've covered so far?",
        "tl;dr of your last few answers",
        "Recap the main points you suggested",
        "boil our back-and-forth down to action items",
    ],
)
def test_a_summary_of_the_conversation_says_so(question: str) -> None:
    assert summarizes_conversation(question, has_answers=False)


@pytest.mark.parametrize(
    "question",
    [
        "Summarize this article about climate change in three bullet points",
        "Give me a TL;DR of this report",
        "Please summarize this thread",
        "key takeaways from the attached PDF?",
        "Summarize: the committee met on Tuesday and agreed to postpone the vote.",
        "sum this up " + "and the market rallied on the news " * 15,
    ],
)
def test_a_summary_of_content_is_not_of_the_conversation(question: str) -> None:
    assert not summarizes_conversation(question, has_answers=True)


def test_a_bare_recap_means_the_conversation_when_it_has_answers() -> None:
    assert summarizes_conversation("recap pls", has_answers=True)
    assert not summarizes_conversation("recap pls", has_answers=False)
