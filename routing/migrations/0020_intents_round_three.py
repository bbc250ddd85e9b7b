"""Bring an installed database's shipped intents up to this release, keeping admins' edits.

- ``summarize`` also condenses content the user gives or points to: its two new
  patterns are added (unless present), and its name and description follow when
  they are still the old defaults.
- Jokes are ``general``: the creative pattern that named them is replaced by the
  same pattern without them, only when it is still exactly as shipped.
- The shipped examples (292 → 717) are added where the database has none of that
  text; the shipped example about a report's chapter 3 findings becomes
  ``summarize``. The beat task retrains the model within a minute (its examples
  changed).

Only rows that exist are touched: a database whose intents an admin deleted
gets nothing back but examples of intents it still has.
"""

# ruff: noqa: E501 - the shipped patterns and texts, frozen verbatim
from __future__ import annotations

import json
from typing import Any

from django.db import migrations

from routing.classification.training import SHIPPED_DIR

OLD_SUMMARIZE = ("Summarize the conversation", "Summarise the last answers of this conversation.")
NEW_SUMMARIZE = (
    "Summarize",
    "Condensing content: the conversation so far or its last answers, or a text, article, report, thread or document the user gives or points to (recaps, TL;DRs, key takeaways, shorter versions).",
)
SUMMARIZE_CONTENT = (  # (regex, weight), as shipped in this release
    (
        "\\b(summari[sz]\\w*|summary|sum (it |this |that )?up|recap\\w*|tl;?dr|condense|boil (it |this )?down|gist|(key )?takeaways|synopsis|digest|cliff ?notes|in a nutshell|main points|key points|bullet-?points?)\\b.{0,80}\\b(articles?|reports?|papers?|pdfs?|docs?|documents?|files?|threads?|e-?mails?|transcripts?|notes|minutes|whitepapers?|contracts?|polic(y|ies)|chapters?|books?|essays?|memos?|posts?|blogs?|news|videos?|podcasts?|lectures?|meetings?|calls?|texts?|passages?|paragraphs?|studies|study|slides|deck|readme|changelog|release notes|reviews|feedback|comments|tickets?|specs?|proposals?|filings?|lease|agreement)\\b",
        8.0,
    ),
    (
        "^\\W*(please |pls |can you |could you )?(summari[sz]e|tl;?dr|recap|condense|sum up|shorten|boil down)\\b[^.?!]{0,40}:\\s*\\S",
        4.0,
    ),
)
OLD_JOKES = (
    r"\b(jokes?|puns?|riddles?|knock[- ]knock|roast|wedding speech|vows|eulogy|"
    r"screenplay|alternative endings?|plot twists?|storyline|protagonist|villain)\b"
)
NEW_JOKES = (
    r"\b(roast|wedding speech|vows|eulogy|"
    r"screenplay|alternative endings?|plot twists?|storyline|protagonist|villain)\b"
)
CHAPTER_FINDINGS = "What are the main findings in chapter 3 of the report I uploaded?"


def _summarize(intents: Any, patterns: Any) -> None:
    summarize = intents.filter(slug="summarize").first()
    if summarize is None:
        return
    if (summarize.name, summarize.description) == OLD_SUMMARIZE:
        summarize.name, summarize.description = NEW_SUMMARIZE
        summarize.save(update_fields=["name", "description"])
    for pattern, weight in SUMMARIZE_CONTENT:
        if not patterns.filter(intent=summarize, pattern=pattern).exists():
            patterns.create(intent=summarize, kind="regex", pattern=pattern, weight=weight)


def _jokes(intents: Any, patterns: Any) -> None:
    creative = intents.filter(slug="creative-orientation").first()
    if creative is not None:
        patterns.filter(intent=creative, pattern=OLD_JOKES).update(pattern=NEW_JOKES)


def _examples(intents: Any, examples: Any) -> None:
    by_slug = {i.slug: i for i in intents.all()}
    summarize = by_slug.get("summarize")
    moved = examples.filter(intent=summarize, text=CHAPTER_FINDINGS)
    if summarize is not None and not moved.exists():
        examples.filter(source="shipped", text=CHAPTER_FINDINGS).update(intent=summarize)
    have = set(examples.values_list("text", flat=True))
    lines = (SHIPPED_DIR / "intents.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    examples.bulk_create(
        [
            examples.model(intent=by_slug[r["intent"]], text=r["text"], source="shipped")
            for r in rows
            if r["intent"] in by_slug and r["text"] not in have
        ],
        ignore_conflicts=True,
    )


def forwards(apps: Any, schema_editor: Any) -> None:
    intents = apps.get_model("routing", "Intent").objects
    patterns = apps.get_model("routing", "IntentPattern").objects
    examples = apps.get_model("routing", "IntentExample").objects
    _summarize(intents, patterns)
    _jokes(intents, patterns)
    _examples(intents, examples)


class Migration(migrations.Migration):
    dependencies = [("routing", "0019_hedging_and_splits")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
