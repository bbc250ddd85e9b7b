"""The shipped conversation intents (seed 001): summarize (the conversation, or content the
user gives or points to), and questions about the conversation."""

from __future__ import annotations

from routing.classification.shipped.base import DefaultIntent, regex

SUMMARIZE = DefaultIntent(
    slug="summarize",
    name="Summarize",
    description="Condensing content: the conversation so far or its last answers, or a "
    "text, article, report, thread or document the user gives or points to (recaps, "
    "TL;DRs, key takeaways, shorter versions).",
    priority=10,
    patterns=(
        regex(  # a summary of something named: it outweighs "the attached report"
            r"\b(summari[sz]\w*|summary|sum (it |this |that )?up|recap\w*|tl;?dr|condense|"
            r"boil (it |this )?down|gist|(key )?takeaways|synopsis|digest|cliff ?notes|"
            r"in a nutshell|main points|key points|bullet-?points?)\b.{0,80}\b(articles?|"
            r"reports?|papers?|pdfs?|docs?|documents?|files?|threads?|e-?mails?|transcripts?|"
            r"notes|minutes|whitepapers?|contracts?|polic(y|ies)|chapters?|books?|essays?|"
            r"memos?|posts?|blogs?|news|videos?|podcasts?|lectures?|meetings?|calls?|texts?|"
            r"passages?|paragraphs?|studies|study|slides|deck|readme|changelog|release notes|"
            r"reviews|feedback|comments|tickets?|specs?|proposals?|filings?|lease|agreement)\b",
            8.0,
        ),
        regex(  # content given in the question itself: "summarize this: ..."
            r"^\W*(please |pls |can you |could you )?(summari[sz]e|tl;?dr|recap|condense|"
            r"sum up|shorten|boil down)\b[^.?!]{0,40}:\s*\S",
            4.0,
        ),
        regex(
            r"^\W*(one-sentence |short |quick )?(recap|tl;?dr|summary|"
            r"summari[sz]e( (it|this|that))?|sum (it )?up)\W*(pls|please)?\W*$",
            3.0,
        ),
        regex(
            r"\b(summari[sz]\w*|summary|sum (it |this |that |everything |it all )?up|"
            r"recap|tl;?dr|too long,? didn'?t read|condense|boil (it |this )?down|nutshell|"
            r"(key )?takeaways|highlights|wrap (it )?up|shorter version|short version|"
            r"bullet-?point|action items|pull together|main points|conclusions|gist|digest|"
            r"round-?up|rundown|run-down|shorten|abridge\w*|recapitulat\w*|distill\w*|synopsis|"
            r"in brief|briefly|key points|where we'?re at|where we stand|wrap-?up|consolidate|"
            r"collate|compile)\b",
            2.0,
        ),
        regex(
            r"\b(summari[sz]e|sum up|recap|condense|shorten|tl;?dr|boil down|distill|gist|"
            r"digest|round-?up|recapitulate)\b.{0,40}\b(your|you|we|our|(the|this) "
            r"(conversation|chat|discussion|thread|session)|above)\b",
            3.0,
        ),
        regex(r"\bsum (everything|it all|things) up\b", 2.0),
        regex(
            r"\btoo long,? didn'?t read\b|\bboil\b.{0,40}\bdown\b|"
            r"\b(summary|recap|tl;?dr|gist|digest)\b.{0,40}\b(you|your|we|our|above)\b|"
            r"\b(turn|convert|rework|condense|make)\b.{0,30}\b(our|this|the|everything you)\b"
            r".{0,30}\b(chat|conversation|discussion|thread|said|told me)\b.{0,30}\binto\b",
            3.0,
        ),
        regex(
            r"\bwhere (did|do|have) we (land|landed|end up|ended up|net out|come out)\b|"
            r"\b(the short of it|long story short)\b",
            3.0,
        ),
        regex(
            r"\byour (last|previous|earlier)? ?(answers?|responses?|replies|messages?|"
            r"explanations?)\b.{0,60}\b(summari[sz]e|sum (it )?up|recap|condense|shorten|"
            r"boil (it )?down|distill|shorter)\b",
            3.0,
        ),
        regex(
            r"\b((this|our|the|whole|entire) (conversation|chat|thread|session|discussion|"
            r"exchange|back-and-forth|talk)|so far|(advice|points|answers?|responses?|"
            r"recommendations|suggestions|everything) above|today|your (last|previous|earlier|"
            r"recent)?\s*(\w+\s)?(answers?|responses?|replies|advice|recommendations|suggestions|"
            r"explanations?)|what you('ve)? (just )?(said|explained|told me|wrote|suggested)|"
            r"(you|we)('ve| have| had)? (discussed|covered|talked about|concluded|decided|"
            r"agreed|explained|suggested|told me|recommended|reached|given me|gone over|"
            r"went over|laid out|said|covered|figured out|worked out|landed on)|"
            r"(suggestions|points|ideas|options|advice|recommendations|feedback) you('ve| have)? "
            r"(made|gave|given|offered|laid out|listed|proposed)|"
            r"(have|did) (we|you) (discuss|cover|conclude|decide|agree|explain|suggest)\w*|"
            r"everything (you|we)|you told me)\b",
            1.5,
        ),
    ),
)


CONVERSATION_QUERY = DefaultIntent(
    slug="conversation-query",
    name="Question about the conversation",
    description="Questions about the conversation itself, answered from its history.",
    priority=10,
    patterns=(
        regex(
            r"\b(what|which)( \w+){0,3} (did|have|had) (i|you|u|we) (just )?(ask|asked|say|said|"
            r"mean|meant|mention\w*|suggest\w*|recommend\w*|tell|told|give|gave|write|wrote|"
            r"discuss\w*|talk\w* about|choose|chose|pick\w*|propose\w*)\b",
            4.0,
        ),
        regex(r"\bremind me (what|which|how|of)\b", 4.0),
        regex(
            r"\b(have|did|had) (we|i|you) (\w+ )?(talk(ed)?|discuss(ed)?|"
            r"cover(ed)?|mention(ed)?|ask(ed)?|tell|told|give|gave|given|say|said|bring up|"
            r"brought up|sent|shared|provided|shown|showed|answer(ed)?|address(ed)?)\b",
            3.5,
        ),
        regex(
            r"\bwhat was (my|your|the)\b.{0,60}\b(earlier|before|first|second|third|last|"
            r"previous|you (said|gave|suggested|recommended|mentioned|told))",
            3.5,
        ),
        regex(
            r"\b(my|your) (first|second|third|last|previous|earlier|original) (question|answer|"
            r"message|reply|response)s?\b",
            2.5,
        ),
        regex(r"\bwhat (do|did) you mean\b", 3.5),
        regex(
            r"\bcome through\b|\bdid you (get|receive|see) (it|that|my)\b|"
            # a quote opens: ' " or a typographic quote (U+2018, U+201C)
            "\\byou (said|wrote|mentioned) ['\"\u2018\u201c]",
            3.0,
        ),
        regex(
            r"\byou (brought up|raised|referred to|were referring to)\b|"
            r"\bwhat were you (referring to|talking about)\b|"
            r"\byou (suggested|said|mentioned|recommended|proposed|told me)\b.{0,30}"
            r"\b(ago|earlier|before)\b|"
            r"\b(who|which of us) (brought up|mentioned|asked|said|suggested|raised)\b|"
            r"\b(you or me|me or you)\b",
            3.5,
        ),
        regex(
            r"\bhow long have we been\b|\b(have|had) we been (chatting|talking)\b|"
            r"\bdid you (already |ever )?(answer|address|respond to|cover)\b",
            3.5,
        ),
        regex(r"\bwhat (were|are) we (talking|discussing|chatting)\b", 3.5),
        regex(r"\b(how many|which)( of my)? questions\b", 3.5),
        regex(
            r"\b(earlier|before) you (said|mentioned|suggested|told|recommended|wrote)\b|"
            r"\byou (said|mentioned|suggested|told me|recommended) (earlier|before|previously)\b|"
            r"\bdidn'?t you (say|tell|mention)\b|\bdid you say\b",
            3.5,
        ),
        regex(
            r"\b(when|where) did (i|we|you) (first )?(bring up|mention|ask|say|talk about|suggest)",
            3.5,
        ),
        regex(r"\b(quote (back|me)|scroll back|repeat your|say that again)\b", 3.0),
        regex(
            r"\b(earlier|before|previously|a (few|couple of) (messages|answers|minutes) ago|"
            r"(two|three|\d+) (answers|messages|questions) ago|in this (chat|conversation|"
            r"thread|session))\b",
            1.0,
        ),
    ),
)
