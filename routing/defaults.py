"""The intents, rule patterns and scope patterns Flywheel ships with.

Plain data: `routing.services.defaults_load` installs it. Patterns are written
for meaning (the verbs and nouns people use for a kind of request), matched
case-insensitively by RE2; keywords match whole words.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DefaultPattern:
    pattern: str
    weight: float = 1.0
    is_regex: bool = False


@dataclass(frozen=True)
class DefaultIntent:
    slug: str
    name: str
    description: str
    priority: int = 0
    patterns: tuple[DefaultPattern, ...] = field(default_factory=tuple)


def _kw(*keywords: str, weight: float = 1.0) -> tuple[DefaultPattern, ...]:
    return tuple(DefaultPattern(k, weight) for k in keywords)


def _re(pattern: str, weight: float = 1.0) -> DefaultPattern:
    return DefaultPattern(pattern, weight, is_regex=True)


# How the weights work (see routing.classify): an intent's score is the sum of
# the weights of its rules that match; one rule of 2.5 or more is enough on
# its own, weaker ones (1.0-1.5) need a second signal. A close runner-up
# lowers the confidence, and below the policy threshold the answer is
# "general" (or the LLM's, when one is configured).

# Code pasted into the question: declarations, calls, operators, SQL.
_CODE_PRESENT = (
    r"```|`[^`\n]{1,80}`|\bdef \w+\(|\bfunction\b\s*\w*\s*\(|=>|\bfn \w+\(|\bfunc \w+|"
    r"\b(public|private|protected)\s+(static\s+)?\w+\s+\w+\s*[(;=]|\bclass \w+\s*[:({]|"
    r"\breturn\b[^\n]{0,60};|\n[ \t]{2,}\S|\bwith \w+\([^)\n]*\) as \w+:|\bconsole\.log\(|"
    r"\^[^\s]{0,40}\$|\\w\+|"
    r"\b(if|for|while)\s*\(|\b(const|let|var) \w+\s*=|#include|!==?|===?|\+\+|\$\(|"
    r"\bselect\b[^\n]{1,120}\bfrom\b|\bif \w+( \w+)?:\n|\bfor \w+ in\b|\w\.\w+\([^)\n]{0,40}\)"
)

# Technologies people compare.
_TECH = (
    r"(postgres(ql)?|mysql|sqlite|redis|memcached|kafka|rabbitmq|cassandra|elasticsearch|"
    r"mongodb|dynamodb|clickhouse|timescaledb|influxdb|kubernetes|nomad|docker|grpc|rest|"
    r"graphql|http/?[123]|quic|tcp|udp|websockets?|lambda|serverless|aws|gcp|azure|"
    r"microservices?|monolith|sql|nosql|cqrs|event sourcing|crud)"
)

# The kinds of document people ask about.
_DOCUMENT = (
    r"(pdfs?|documents?|docs?|reports?|manuals?|handbooks?|guides?|guidelines|contracts?|"
    r"agreements?|lease|policy|policies|nda|sow|specs?|specification|rfcs?|papers?|study|"
    r"studies|memos?|minutes|whitepapers?|transcripts?|invoices?|terms of service|brochures?|"
    r"slides|deck|files?|article|readme|wiki page|faq|msa|sla|eula|10-k|prospectus|bylaws|"
    r"charter|syllabus|thesis|dissertation|statute|regulation|filing|proposal|rfp|"
    r"datasheet|changelog|release notes|briefing|summary report|appendix|annex|exhibit|"
    r"footnotes?|spreadsheet|email thread|handout)"
)

_CREATIVE = DefaultIntent(
    slug="creative-orientation",
    name="Creative orientation",
    description="Creating outcomes: vision, structural tension between current reality "
    "and a desired outcome, brainstorming, ideation and creative writing.",
    patterns=(
        *_kw("structural tension", "creative orientation", "desired outcome", weight=3.0),
        *_kw("current reality", weight=3.0),
        _re(
            r"\b(result|outcome|future)s? (we'?re|i'?m|we are|i am) "
            r"(after|aiming for|hoping for)\b|"
            r"\bdream with me\b|\bwhat would (a|an|the|our|my)? ?\w+( \w+)? (look|be) like if\b",
            2.5,
        ),
        _re(
            r"\b(jokes?|puns?|riddles?|knock[- ]knock|roast|wedding speech|vows|eulogy|"
            r"screenplay|alternative endings?|plot twists?|storyline|protagonist|villain)\b",
            2.5,
        ),
        _re(
            r"\b(write|compose|draft|pen|craft|make up|give me|need)\b.{0,40}\b(poems?|poetry|"
            r"haikus?|limericks?|sonnets?|lyrics|songs?|stor(y|ies)|tales?|novel|screenplay|"
            r"slogans?|taglines?|jingles?|verses?|rhymes?|toast|opening (line|paragraph))\b",
            3.0,
        ),
        _re(
            r"\b(poems?|haikus?|songs?|stor(y|ies)|limericks?|lyrics|sonnets?|raps?|ballads?|"
            r"tales?)\s+(about|on|for|where|in which)\b",
            3.0,
        ),
        _re(
            r"\b(poems?|poetry|poetic|haikus?|limericks?|sonnets?|lyrics|bedtime story|"
            r"short story|fairy tale|slogans?|taglines?|jingles?|fictional|sci-fi story|"
            r"worldbuilding)\b",
            2.0,
        ),
        _re(
            r"\b(blank (canvas|page)|spark (something|ideas?|my imagination)|dialogue scene|"
            r"write a scene|scene where|monologue|fritz|creating (is|vs\.?|versus))\b",
            2.5,
        ),
        _re(r"\b(brainstorm\w*|ideation|imagine|envision\w*|daydream\w*)\b", 2.5),
        _re(r"\b(ideas|names|titles|themes|concepts|suggestions)\s+(for|to)\b", 2.5),
        _re(
            r"\b(wild|crazy|fun|fresh|original|creative|unusual|quirky|clever|catchy)\s+"
            r"(ideas?|names?|ways|titles?|slogans?)\b",
            2.5,
        ),
        _re(
            r"\b(help me )?(picture|visuali[sz]e) (it|that|this|what|how|my|our|the)\b|"
            r"\bwhat (would|could|might) (it|that|this|life) look like\b|\bpossible futures\b",
            2.5,
        ),
        _re(
            r"\b(sound|sounds|sounding|make it|more)\b.{0,20}\b(poetic|lyrical|dramatic|"
            r"whimsical|funnier|catchier|vivid|evocative|playful)\b",
            2.0,
        ),
        _re(r"\b(come up with|dream up|invent|make up)\b", 1.5),
        _re(
            r"\b(mythical|mythological|fantasy|fairy|dragons?|wizards?|magic(al)?|legends?|"
            r"creatures?|utopia\w*|alternate (history|universe)|fictional)\b",
            1.5,
        ),
        _re(
            r"\b(writing|write) (songs?|poems?|poetry|stories|fiction|music|a book|my book|"
            r"my novel|lyrics)\b|\b(songwriting|my muse|unstuck)\b",
            2.5,
        ),
        _re(
            r"\b(i|we) (dream of|long for|long to|yearn\w*|aspire\w*|wish (i|we) could)\b|"
            r"\bmy dream\b",
            2.0,
        ),
        _re(
            r"\b(what|which) (result|outcome|future)s? do (i|we) (really |actually |truly )?want\b|"
            r"\bfocus on the (outcome|result|end result)\b|\boutcome rather than\b|"
            r"\bwhat (do )?(i|we) (really |actually |truly )?want\b|"
            r"\b(result|outcome)s? (i|we) (actually |really |truly )?want\b",
            3.0,
        ),
        _re(
            r"\b(creative(ly)?|creativity|inspiration|inspired|artistic|my (novel|album|art))\b",
            1.5,
        ),
        _re(r"\b(writer'?s block|creative block|creatively blocked)\b", 3.0),
        _re(
            r"\b(stuck|blocked|uninspired)\b.{0,40}\b(novel|book|chapter|song|album|painting|"
            r"drawing|art|writing|story|script|poem|design|lyrics)\b",
            2.0,
        ),
        _re(
            r"\b(vision|what i (actually |really |truly )?want to (create|build|make)|"
            r"where (do )?(i|we) want to be|building toward|bring into being)\b",
            2.5,
        ),
        _re(
            r"\b(want|wants|wanted|dream|hope|plan|aim|longing) to (create|launch|start|release|"
            r"write|make|build|open|run|become|have)\b",
            1.5,
        ),
        _re(
            r"\b(right now|currently|where (i|we) (am|are|stand)( now| today)?|"
            r"where (i|we)'?(m|re) (at|now|today))\b",
            1.5,
        ),
    ),
)

_TECHNICAL = DefaultIntent(
    slug="technical-analysis",
    name="Technical analysis",
    description="Analysing systems: architecture, performance, scalability, trade-offs, "
    "root causes and comparisons of technologies.",
    patterns=(
        _re(
            r"\b(root cause|bottlenecks?|capacity planning|post-?mortem|outages?|"
            r"system design|consistent hashing|congestion control|p9\d|p50|"
            r"tradeoffs?|trade-offs?|pros and cons|scalability)\b",
            3.0,
        ),
        _re(
            r"\bwhy (is|are|does|do|would|did|could)\b.{0,80}\b(slow|slower|fail\w*|crash\w*|"
            r"hang\w*|stall\w*|leak\w*|time ?out|spike\w*|jump\w*|uneven|add|grow\w*|drop\w*)",
            2.5,
        ),
        _re(
            r"\b(postgres(ql)?|mysql|redis|kafka|rabbitmq|cassandra|elasticsearch|mongodb|"
            r"dynamodb|clickhouse|timescaledb|influxdb|kubernetes|k8s|jvm|lambda|nginx|grpc|"
            r"rest|graphql|http/?[23]|tcp|udp|dns|websockets?|rds|etl|cdn|microservices?|"
            r"monolith|load balancers?|message queues?|event store|cache layer|s3|quic|tls|"
            r"ssl|api|apis|backend|frontend|database|databases|db|orm|cqrs|event sourcing|crud|"
            r"serverless|containers?|docker|aws|gcp|azure|cloud|vms?|network\w*|protocols?|"
            r"sql|nosql|index(es)?|seq scan|query plan|explain analyze)\b",
            1.5,
        ),
        _re(
            rf"\b{_TECH}\b.{{0,40}}\b(or|vs\.?|versus|instead of|over|compared to)\b"
            rf".{{0,40}}\b{_TECH}\b",
            2.0,
        ),
        _re(
            r"\b(latency|throughput|performance|slow|slower|slowness|load|capacity|"
            r"concurren\w*|downtime|incident|bandwidth|iowait|cpu|memory|oom\w*|gc|"
            r"garbage collect\w*|req/s|rps|qps|traffic|workloads?|stalls?|hangs|freezes|"
            r"timeouts?|errors? rates?|5\d\ds|faster|out-of-memory|out of memory|"
            r"packet loss|hit rate|jitter|saturat\w*|contention|ceiling|headroom|restarts?|"
            r"recover\w*|goes (yellow|red|down)|unhealthy|flaky)\b",
            1.5,
        ),
        _re(
            r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds|gb|tb|mb|%|k|rps|qps|req/s|cores?|nodes|"
            r"rows|records|users|requests|events|messages|connections|am|pm)\b",
            1.5,
        ),
        _re(
            r"\b(architecture|infrastructure|scal(e|es|ing|able)|shard\w*|replica\w*|"
            r"partition\w*|consistency|caching|cache|cluster|nodes|schema|data model|"
            r"rate limit\w*|availability|failover|storage|queues?|worker pool|thread pool|"
            r"channel|dispatcher|mutex|locks?|deadlocks?|race conditions?|pipeline|"
            r"deployment|servers?|relational|many-to-many|one-to-many|normali[sz]\w*|"
            r"denormali[sz]\w*|data modell?ing|migration strategy|json column|foreign keys?|"
            r"(own|separate|join) tables?|columns?|availability zones?|regions?|batch jobs?|"
            r"cron|services|node|index scan|query planner|staging|production|prod)\b",
            1.5,
        ),
        _re(
            r"\b(went|gone|jumped|grew|grown|increased|dropped|degraded|spiked|climbed|fell|"
            r"rose|doubled|tripled)\s+(from\b.{0,30}\bto\b|overnight|since)",
            1.5,
        ),
        _re(
            r"\b(compare|comparison|versus|vs\.?|evaluate|assess|overkill|worth (it|enabling|"
            r"using|adopting)|which is better|better for|should (we|i|our) (use|pick|choose|go|"
            r"put|add|move|switch|migrate|adopt)|(faster|slower|cheaper|more scalable|"
            r"more reliable|more efficient) than|(what do|what would) (we|i) (give up|lose|gain)|"
            r"downsides?|drawbacks?|(costs?|risks?) of|"
            r"design an? .{0,40}(architecture|system|service|schema|data model|database|api|"
            r"pipeline)|worth the (headache|hassle|effort|complexity|cost)|should (we|i) (shard|"
            r"partition|cache|split|denormali[sz]e|replicate|scale))\b",
            1.5,
        ),
        _re(r"\b(how does|how do|explain how|walk me through)\b", 0.5),
    ),
)

_DOCUMENT_QA = DefaultIntent(
    slug="document-qa",
    name="Document Q&A",
    description="Answering from documents the user refers to: reports, manuals, "
    "contracts, policies, papers, specs, attached files.",
    patterns=(
        _re(
            r"\b(attached|attachment|uploaded|enclosed|i (shared|pasted|gave you|sent( you)?|"
            r"provided|linked))\b",
            2.5,
        ),
        _re(
            r"\b(according to|per|based on|as stated in|as described in)\s+"
            r"(the|this|that|my|our|their)\b",
            2.5,
        ),
        _re(
            r"\b(section|chapter|page|clause|appendix|paragraph|article|table|figure)\s+"
            r"(\d|[ivx]+\b)",
            2.0,
        ),
        _re(rf"\b{_DOCUMENT}\b", 1.5),
        _re(
            rf"\b{_DOCUMENT}\s+(mentions?|says?|states?|lists?|covers?|defines?|specifies)\b",
            1.5,
        ),
        _re(
            r"\b(the|these) (authors?|researchers|study|paper)\b|\b(discussion|methods?|results|"
            r"introduction|conclusions?|limitations) section\b",
            2.0,
        ),
        _re(
            rf"\b(in|from|of|within|inside)\s+(the|this|that|my|our|their)\s+(\S+\s+){{0,3}}?"
            rf"{_DOCUMENT}\b",
            2.0,
        ),
        _re(
            rf"\b(the|this|that|my|our|their)\s+(\S+\s+){{0,3}}?{_DOCUMENT}\s+(say|says|said|"
            r"state|states|mention|mentions|list|lists|cover|covers|claim|claims)\b",
            2.0,
        ),
        _re(
            r"\b(what|where|which|how|does|do|did|is there|are there|anything)\b.{0,80}\b("
            r"say|says|said|mention\w*|state|states|list\w*|cover|covers|flag\w*|require\w*|"
            r"specif\w*|describe\w*|report\w*|approve\w*|allow\w*)\b",
            1.0,
        ),
        _re(r"\b(extract|find|list|pull out|quote)\b.{0,40}\b(from|in)\b", 1.0),
        _re(
            rf"\b(go through|read through|look through|skim|scan|read|check)\s+(the|this|that|my|"
            rf"our|their)\s+(\S+\s+){{0,3}}?{_DOCUMENT}\b",
            2.0,
        ),
    ),
)

_CODE_REVIEW = DefaultIntent(
    slug="code-review",
    name="Code review",
    description="Reviewing code: bugs, style, naming, refactoring, tests, pull requests.",
    patterns=(
        *_kw("code review", "pull request", "refactor", "idiomatic", weight=3.0),
        _re(r"\bcode smells?\b|\b(tear apart|roast) my\b", 3.0),
        _re(
            r"\b(review|look over|critique|audit|check|proofread)\b.{0,30}\b(my|this|these|the|"
            r"our)\b.{0,20}\b(code|function|method|class|script|snippet|diff|pr|patch|"
            r"implementation|rust|python|go|java|js|javascript|typescript|sql|query|component|"
            r"dockerfile|module)\b",
            3.0,
        ),
        _re(r"\b(pr|diff|patch|commit|merge request|changeset)\b", 1.5),
        _re(
            r"\b(my|this|the|our|your|their|teammate'?s) (pr|mr|merge request|pull request|diff|"
            r"patch|changeset|commit)\b|\b(diff|patch|snippet|code|function|script|pr|class|"
            r"method|component|module)\b.{0,30}\b(i|you|they) (pasted|shared|sent|wrote|posted|"
            r"showed)\b",
            2.5,
        ),
        _re(
            r"\b(better|good|clearer|descriptive) names? for (a|an|the|this|these|my|our)? ?"
            r"(function|fn|func|method|class|variable|var|module|file|field|column|endpoint|"
            r"helper)s?\b|"
            r"\bvariable names?\b|\b(nitpick|nit)\b",
            2.5,
        ),
        _re(
            r"\b(unit tests?|test cases|tests for|pytest|jest|junit|edge cases|test coverage|"
            r"mock(s|ing)?)\b",
            1.5,
        ),
        _re(
            r"\b(forget|forgot|forgetting|leak\w*|close|closing)\b.{0,30}\b(file handle|"
            r"connection|resource|lock|cursor|stream)s?\b",
            1.5,
        ),
        _re(r"\b(review|reviewer|critique|audit|look over|proofread)\b", 1.0),
        _re(
            r"\b(in|with) (this|my|the following) (loop|function|method|code|snippet|class|"
            r"script|regex|component)\b|\b(tests?|test cases) (would you write|should i write|"
            r"for (the|this|my|that))\b",
            2.0,
        ),
        _re(_CODE_PRESENT, 1.5),
        _re(
            r"\b(returns?|returning) (undefined|null|none|nan|the wrong|wrong)\b|\bundefined\b|"
            r"\bnull pointer\b|\bsegfault\w*|\bstack ?trace\b|\boff[- ]by[- ]one\b|"
            r"\bblows? up\b|\bcrash(es|ing)?\b|\bthrows?\b",
            1.5,
        ),
        _re(
            r"\b(bugs?|buggy|wrong with|what am i doing wrong|off in|issues? (with|in)|cleaner|"
            r"simplif\w*|tidy|clean (it |this )?up|rewrite|readab\w*|best practice|"
            r"bad practice|thread-?safe|injection|unit tests?|test cases|pytest|jest|naming|"
            r"names for (these|this|my) (variables?|functions?|methods?|classes?)|linter|lint|"
            r"type hints|single responsibility|solid principles|dry|anti-?patterns?|pythonic|"
            r"more (readable|idiomatic|elegant|concise|maintainable)|split (it |this )?up|"
            r"too (long|big|complex)|\d+-line|god (class|object)|(look|looks) (right|correct|"
            r"ok|okay|good)|bite me|footguns?|gotchas?|pitfalls?|(does|do|doing) too much|"
            r"too many responsibilities|default argument|mutable default|list comprehension|"
            r"one-liner|structure makes sense|feedback on (my|this|the) (code|pr|diff)|"
            r"break (it |this |them )?up|\d+ lines|does everything|indent\w*|camelcase|"
            r"snake_case|pep ?8|code style|my style)\b",
            1.5,
        ),
        _re(
            r"\b(functions?|methods?|class(es)?|variables?|parameters?|decorators?|components?|"
            r"snippet|loops?|exceptions?|try/except|callbacks?|promises?|async|equals|"
            r"controller|python|javascript|typescript|java|rust|golang|c\+\+|react|bash|"
            r"dockerfile|code|regex|regexp|script)\b",
            1.0,
        ),
    ),
)

_SUMMARIZE = DefaultIntent(
    slug="summarize",
    name="Summarize the conversation",
    description="Summarise the last answers of this conversation.",
    priority=10,
    patterns=(
        _re(
            r"^\W*(one-sentence |short |quick )?(recap|tl;?dr|summary|"
            r"summari[sz]e( (it|this|that))?|sum (it )?up)\W*(pls|please)?\W*$",
            3.0,
        ),
        _re(
            r"\b(summari[sz]\w*|summary|sum (it |this |that |everything |it all )?up|"
            r"recap|tl;?dr|too long,? didn'?t read|condense|boil (it |this )?down|nutshell|"
            r"(key )?takeaways|highlights|wrap (it )?up|shorter version|short version|"
            r"bullet-?point|action items|pull together|main points|conclusions|gist|digest|"
            r"round-?up|rundown|run-down|shorten|abridge\w*|recapitulat\w*|distill\w*|synopsis|"
            r"in brief|briefly|key points|where we'?re at|where we stand|wrap-?up|consolidate|"
            r"collate|compile)\b",
            2.0,
        ),
        _re(
            r"\b(summari[sz]e|sum up|recap|condense|shorten|tl;?dr|boil down|distill|gist|"
            r"digest|round-?up|recapitulate)\b.{0,40}\b(your|you|we|our|(the|this) "
            r"(conversation|chat|discussion|thread|session)|above)\b",
            3.0,
        ),
        _re(r"\bsum (everything|it all|things) up\b", 2.0),
        _re(
            r"\btoo long,? didn'?t read\b|\bboil\b.{0,40}\bdown\b|"
            r"\b(summary|recap|tl;?dr|gist|digest)\b.{0,40}\b(you|your|we|our|above)\b|"
            r"\b(turn|convert|rework|condense|make)\b.{0,30}\b(our|this|the|everything you)\b"
            r".{0,30}\b(chat|conversation|discussion|thread|said|told me)\b.{0,30}\binto\b",
            3.0,
        ),
        _re(
            r"\bwhere (did|do|have) we (land|landed|end up|ended up|net out|come out)\b|"
            r"\b(the short of it|long story short)\b",
            3.0,
        ),
        _re(
            r"\byour (last|previous|earlier)? ?(answers?|responses?|replies|messages?|"
            r"explanations?)\b.{0,60}\b(summari[sz]e|sum (it )?up|recap|condense|shorten|"
            r"boil (it )?down|distill|shorter)\b",
            3.0,
        ),
        _re(
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

_CONVERSATION_QUERY = DefaultIntent(
    slug="conversation-query",
    name="Question about the conversation",
    description="Questions about the conversation itself, answered from its history.",
    priority=10,
    patterns=(
        _re(
            r"\b(what|which)( \w+){0,3} (did|have|had) (i|you|u|we) (just )?(ask|asked|say|said|"
            r"mean|meant|mention\w*|suggest\w*|recommend\w*|tell|told|give|gave|write|wrote|"
            r"discuss\w*|talk\w* about|choose|chose|pick\w*|propose\w*)\b",
            4.0,
        ),
        _re(r"\bremind me (what|which|how|of)\b", 4.0),
        _re(
            r"\b(have|did|had) (we|i|you) (\w+ )?(talk(ed)?|discuss(ed)?|"
            r"cover(ed)?|mention(ed)?|ask(ed)?|tell|told|give|gave|given|say|said|bring up|"
            r"brought up|sent|shared|provided|shown|showed|answer(ed)?|address(ed)?)\b",
            3.5,
        ),
        _re(
            r"\bwhat was (my|your|the)\b.{0,60}\b(earlier|before|first|second|third|last|"
            r"previous|you (said|gave|suggested|recommended|mentioned|told))",
            3.5,
        ),
        _re(
            r"\b(my|your) (first|second|third|last|previous|earlier|original) (question|answer|"
            r"message|reply|response)s?\b",
            2.5,
        ),
        _re(r"\bwhat (do|did) you mean\b", 3.5),
        _re(
            r"\bcome through\b|\bdid you (get|receive|see) (it|that|my)\b|"
            # a quote opens: ' " or a typographic quote (U+2018, U+201C)
            "\\byou (said|wrote|mentioned) ['\"\u2018\u201c]",
            3.0,
        ),
        _re(
            r"\byou (brought up|raised|referred to|were referring to)\b|"
            r"\bwhat were you (referring to|talking about)\b|"
            r"\byou (suggested|said|mentioned|recommended|proposed|told me)\b.{0,30}"
            r"\b(ago|earlier|before)\b|"
            r"\b(who|which of us) (brought up|mentioned|asked|said|suggested|raised)\b|"
            r"\b(you or me|me or you)\b",
            3.5,
        ),
        _re(
            r"\bhow long have we been\b|\b(have|had) we been (chatting|talking)\b|"
            r"\bdid you (already |ever )?(answer|address|respond to|cover)\b",
            3.5,
        ),
        _re(r"\bwhat (were|are) we (talking|discussing|chatting)\b", 3.5),
        _re(r"\b(how many|which)( of my)? questions\b", 3.5),
        _re(
            r"\b(earlier|before) you (said|mentioned|suggested|told|recommended|wrote)\b|"
            r"\byou (said|mentioned|suggested|told me|recommended) (earlier|before|previously)\b|"
            r"\bdidn'?t you (say|tell|mention)\b|\bdid you say\b",
            3.5,
        ),
        _re(
            r"\b(when|where) did (i|we|you) (first )?(bring up|mention|ask|say|talk about|suggest)",
            3.5,
        ),
        _re(r"\b(quote (back|me)|scroll back|repeat your|say that again)\b", 3.0),
        _re(
            r"\b(earlier|before|previously|a (few|couple of) (messages|answers|minutes) ago|"
            r"(two|three|\d+) (answers|messages|questions) ago|in this (chat|conversation|"
            r"thread|session))\b",
            1.0,
        ),
    ),
)

DEFAULT_INTENTS: tuple[DefaultIntent, ...] = (
    _CREATIVE,
    _TECHNICAL,
    _DOCUMENT_QA,
    _CODE_REVIEW,
    _SUMMARIZE,
    _CONVERSATION_QUERY,
    DefaultIntent(
        slug="general",
        name="General",
        description="Anything else; the intent used when no rule is confident.",
        priority=-10,
    ),
)

# Seed 004: GLOBAL questions need corpus-wide understanding, LOCAL ones a
# specific entity or fact.
DEFAULT_SCOPE_PATTERNS: dict[str, tuple[DefaultPattern, ...]] = {
    "global": (
        _re(r"\bwhat are the (main|primary|key|major|common|recurring) \w+", 2.0),
        _re(r"\b(summary|summari[sz]e|overview|big picture|high[- ]level)\b", 1.5),
        _re(r"\ball (the )?(types|kinds|categories|themes|topics)\b", 1.5),
        _re(r"\bhow many (in )?(total|overall)\b|\b(total|overall) (number|count)\b", 1.5),
        _re(r"\b(general|overall) understanding\b", 1.5),
        _re(r"\b(themes?|trends?|patterns?) (across|in|throughout)\b", 1.5),
        _re(r"\bacross (all|the whole|the entire|every)\b", 1.0),
    ),
    "local": (
        _re(r"\bwhat (is|was) (the |a |an )?[a-z0-9_]", 1.5),
        _re(r"\bwho (is|was)\b", 1.5),
        _re(r"\bwhere (is|does|did|was)\b", 1.5),
        _re(r"\bwhen (did|was|is|does)\b", 1.5),
        _re(r"\b(specific|particular|exact|exactly)\b", 1.5),
        _re(
            r"\b(this|that) (function|class|method|entity|file|document|person|company|"
            r"endpoint|table|module)\b",
            1.5,
        ),
        _re(r"\bdefin(e|ition of)\b", 1.0),
    ),
}
