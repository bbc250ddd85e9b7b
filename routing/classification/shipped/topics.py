"""Shipped intents of what a question asks for (seed 000): creative, technical, documents, code."""

from __future__ import annotations

from routing.classification.shipped.base import DefaultIntent, keywords, regex

# How the weights work (see routing.classification.cascade): an intent's score is the sum of
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


CREATIVE = DefaultIntent(
    slug="creative-orientation",
    name="Creative orientation",
    description="Creating outcomes: vision, structural tension between current reality "
    "and a desired outcome, brainstorming, ideation and creative writing (a joke to "
    "pass the time is general).",
    patterns=(
        *keywords("structural tension", "creative orientation", "desired outcome", weight=3.0),
        *keywords("current reality", weight=3.0),
        regex(
            r"\b(result|outcome|future)s? (we'?re|i'?m|we are|i am) "
            r"(after|aiming for|hoping for)\b|"
            r"\bdream with me\b|\bwhat would (a|an|the|our|my)? ?\w+( \w+)? (look|be) like if\b",
            2.5,
        ),
        regex(
            r"\b(roast|wedding speech|vows|eulogy|"
            r"screenplay|alternative endings?|plot twists?|storyline|protagonist|villain)\b",
            2.5,
        ),
        regex(
            r"\b(write|compose|draft|pen|craft|make up|give me|need)\b.{0,40}\b(poems?|poetry|"
            r"haikus?|limericks?|sonnets?|lyrics|songs?|stor(y|ies)|tales?|novel|screenplay|"
            r"slogans?|taglines?|jingles?|verses?|rhymes?|toast|opening (line|paragraph))\b",
            3.0,
        ),
        regex(
            r"\b(poems?|haikus?|songs?|stor(y|ies)|limericks?|lyrics|sonnets?|raps?|ballads?|"
            r"tales?)\s+(about|on|for|where|in which)\b",
            3.0,
        ),
        regex(
            r"\b(poems?|poetry|poetic|haikus?|limericks?|sonnets?|lyrics|bedtime story|"
            r"short story|fairy tale|slogans?|taglines?|jingles?|fictional|sci-fi story|"
            r"worldbuilding)\b",
            2.0,
        ),
        regex(
            r"\b(blank (canvas|page)|spark (something|ideas?|my imagination)|dialogue scene|"
            r"write a scene|scene where|monologue|fritz|creating (is|vs\.?|versus))\b",
            2.5,
        ),
        regex(r"\b(brainstorm\w*|ideation|imagine|envision\w*|daydream\w*)\b", 2.5),
        regex(r"\b(ideas|names|titles|themes|concepts|suggestions)\s+(for|to)\b", 2.5),
        regex(
            r"\b(wild|crazy|fun|fresh|original|creative|unusual|quirky|clever|catchy)\s+"
            r"(ideas?|names?|ways|titles?|slogans?)\b",
            2.5,
        ),
        regex(
            r"\b(help me )?(picture|visuali[sz]e) (it|that|this|what|how|my|our|the)\b|"
            r"\bwhat (would|could|might) (it|that|this|life) look like\b|\bpossible futures\b",
            2.5,
        ),
        regex(
            r"\b(sound|sounds|sounding|make it|more)\b.{0,20}\b(poetic|lyrical|dramatic|"
            r"whimsical|funnier|catchier|vivid|evocative|playful)\b",
            2.0,
        ),
        regex(r"\b(come up with|dream up|invent|make up)\b", 1.5),
        regex(
            r"\b(mythical|mythological|fantasy|fairy|dragons?|wizards?|magic(al)?|legends?|"
            r"creatures?|utopia\w*|alternate (history|universe)|fictional)\b",
            1.5,
        ),
        regex(
            r"\b(writing|write) (songs?|poems?|poetry|stories|fiction|music|a book|my book|"
            r"my novel|lyrics)\b|\b(songwriting|my muse|unstuck)\b",
            2.5,
        ),
        regex(
            r"\b(i|we) (dream of|long for|long to|yearn\w*|aspire\w*|wish (i|we) could)\b|"
            r"\bmy dream\b",
            2.0,
        ),
        regex(
            r"\b(what|which) (result|outcome|future)s? do (i|we) (really |actually |truly )?want\b|"
            r"\bfocus on the (outcome|result|end result)\b|\boutcome rather than\b|"
            r"\bwhat (do )?(i|we) (really |actually |truly )?want\b|"
            r"\b(result|outcome)s? (i|we) (actually |really |truly )?want\b",
            3.0,
        ),
        regex(
            r"\b(creative(ly)?|creativity|inspiration|inspired|artistic|my (novel|album|art))\b",
            1.5,
        ),
        regex(r"\b(writer'?s block|creative block|creatively blocked)\b", 3.0),
        regex(
            r"\b(stuck|blocked|uninspired)\b.{0,40}\b(novel|book|chapter|song|album|painting|"
            r"drawing|art|writing|story|script|poem|design|lyrics)\b",
            2.0,
        ),
        regex(
            r"\b(vision|what i (actually |really |truly )?want to (create|build|make)|"
            r"where (do )?(i|we) want to be|building toward|bring into being)\b",
            2.5,
        ),
        regex(
            r"\b(want|wants|wanted|dream|hope|plan|aim|longing) to (create|launch|start|release|"
            r"write|make|build|open|run|become|have)\b",
            1.5,
        ),
        regex(
            r"\b(right now|currently|where (i|we) (am|are|stand)( now| today)?|"
            r"where (i|we)'?(m|re) (at|now|today))\b",
            1.5,
        ),
    ),
)


TECHNICAL = DefaultIntent(
    slug="technical-analysis",
    name="Technical analysis",
    description="Analysing systems: architecture, performance, scalability, trade-offs, "
    "root causes and comparisons of technologies.",
    patterns=(
        regex(
            r"\b(root cause|bottlenecks?|capacity planning|post-?mortem|outages?|"
            r"system design|consistent hashing|congestion control|p9\d|p50|"
            r"tradeoffs?|trade-offs?|pros and cons|scalability)\b",
            3.0,
        ),
        regex(
            r"\bwhy (is|are|does|do|would|did|could)\b.{0,80}\b(slow|slower|fail\w*|crash\w*|"
            r"hang\w*|stall\w*|leak\w*|time ?out|spike\w*|jump\w*|uneven|add|grow\w*|drop\w*)",
            2.5,
        ),
        regex(
            r"\b(postgres(ql)?|mysql|redis|kafka|rabbitmq|cassandra|elasticsearch|mongodb|"
            r"dynamodb|clickhouse|timescaledb|influxdb|kubernetes|k8s|jvm|lambda|nginx|grpc|"
            r"rest|graphql|http/?[23]|tcp|udp|dns|websockets?|rds|etl|cdn|microservices?|"
            r"monolith|load balancers?|message queues?|event store|cache layer|s3|quic|tls|"
            r"ssl|api|apis|backend|frontend|database|databases|db|orm|cqrs|event sourcing|crud|"
            r"serverless|containers?|docker|aws|gcp|azure|cloud|vms?|network\w*|protocols?|"
            r"sql|nosql|index(es)?|seq scan|query plan|explain analyze)\b",
            1.5,
        ),
        regex(
            rf"\b{_TECH}\b.{{0,40}}\b(or|vs\.?|versus|instead of|over|compared to)\b"
            rf".{{0,40}}\b{_TECH}\b",
            2.0,
        ),
        regex(
            r"\b(latency|throughput|performance|slow|slower|slowness|load|capacity|"
            r"concurren\w*|downtime|incident|bandwidth|iowait|cpu|memory|oom\w*|gc|"
            r"garbage collect\w*|req/s|rps|qps|traffic|workloads?|stalls?|hangs|freezes|"
            r"timeouts?|errors? rates?|5\d\ds|faster|out-of-memory|out of memory|"
            r"packet loss|hit rate|jitter|saturat\w*|contention|ceiling|headroom|restarts?|"
            r"recover\w*|goes (yellow|red|down)|unhealthy|flaky)\b",
            1.5,
        ),
        regex(
            r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds|gb|tb|mb|%|k|rps|qps|req/s|cores?|nodes|"
            r"rows|records|users|requests|events|messages|connections|am|pm)\b",
            1.5,
        ),
        regex(
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
        regex(
            r"\b(went|gone|jumped|grew|grown|increased|dropped|degraded|spiked|climbed|fell|"
            r"rose|doubled|tripled)\s+(from\b.{0,30}\bto\b|overnight|since)",
            1.5,
        ),
        regex(
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
        regex(r"\b(how does|how do|explain how|walk me through)\b", 0.5),
    ),
)


DOCUMENT_QA = DefaultIntent(
    slug="document-qa",
    name="Document Q&A",
    description="Answering from documents the user refers to: reports, manuals, "
    "contracts, policies, papers, specs, attached files (what they say; condensing a "
    "whole document is summarize).",
    patterns=(
        regex(
            r"\b(attached|attachment|uploaded|enclosed|i (shared|pasted|gave you|sent( you)?|"
            r"provided|linked))\b",
            2.5,
        ),
        regex(
            r"\b(according to|per|based on|as stated in|as described in)\s+"
            r"(the|this|that|my|our|their)\b",
            2.5,
        ),
        regex(
            r"\b(section|chapter|page|clause|appendix|paragraph|article|table|figure)\s+"
            r"(\d|[ivx]+\b)",
            2.0,
        ),
        regex(rf"\b{_DOCUMENT}\b", 1.5),
        regex(
            rf"\b{_DOCUMENT}\s+(mentions?|says?|states?|lists?|covers?|defines?|specifies)\b",
            1.5,
        ),
        regex(
            r"\b(the|these) (authors?|researchers|study|paper)\b|\b(discussion|methods?|results|"
            r"introduction|conclusions?|limitations) section\b",
            2.0,
        ),
        regex(
            rf"\b(in|from|of|within|inside)\s+(the|this|that|my|our|their)\s+(\S+\s+){{0,3}}?"
            rf"{_DOCUMENT}\b",
            2.0,
        ),
        regex(
            rf"\b(the|this|that|my|our|their)\s+(\S+\s+){{0,3}}?{_DOCUMENT}\s+(say|says|said|"
            r"state|states|mention|mentions|list|lists|cover|covers|claim|claims)\b",
            2.0,
        ),
        regex(
            r"\b(what|where|which|how|does|do|did|is there|are there|anything)\b.{0,80}\b("
            r"say|says|said|mention\w*|state|states|list\w*|cover|covers|flag\w*|require\w*|"
            r"specif\w*|describe\w*|report\w*|approve\w*|allow\w*)\b",
            1.0,
        ),
        regex(r"\b(extract|find|list|pull out|quote)\b.{0,40}\b(from|in)\b", 1.0),
        regex(
            rf"\b(go through|read through|look through|skim|scan|read|check)\s+(the|this|that|my|"
            rf"our|their)\s+(\S+\s+){{0,3}}?{_DOCUMENT}\b",
            2.0,
        ),
    ),
)


CODE_REVIEW = DefaultIntent(
    slug="code-review",
    name="Code review",
    description="Reviewing code: bugs, style, naming, refactoring, tests, pull requests.",
    patterns=(
        *keywords("code review", "pull request", "refactor", "idiomatic", weight=3.0),
        regex(r"\bcode smells?\b|\b(tear apart|roast) my\b", 3.0),
        regex(
            r"\b(review|look over|critique|audit|check|proofread)\b.{0,30}\b(my|this|these|the|"
            r"our)\b.{0,20}\b(code|function|method|class|script|snippet|diff|pr|patch|"
            r"implementation|rust|python|go|java|js|javascript|typescript|sql|query|component|"
            r"dockerfile|module)\b",
            3.0,
        ),
        regex(r"\b(pr|diff|patch|commit|merge request|changeset)\b", 1.5),
        regex(
            r"\b(my|this|the|our|your|their|teammate'?s) (pr|mr|merge request|pull request|diff|"
            r"patch|changeset|commit)\b|\b(diff|patch|snippet|code|function|script|pr|class|"
            r"method|component|module)\b.{0,30}\b(i|you|they) (pasted|shared|sent|wrote|posted|"
            r"showed)\b",
            2.5,
        ),
        regex(
            r"\b(better|good|clearer|descriptive) names? for (a|an|the|this|these|my|our)? ?"
            r"(function|fn|func|method|class|variable|var|module|file|field|column|endpoint|"
            r"helper)s?\b|"
            r"\bvariable names?\b|\b(nitpick|nit)\b",
            2.5,
        ),
        regex(
            r"\b(unit tests?|test cases|tests for|pytest|jest|junit|edge cases|test coverage|"
            r"mock(s|ing)?)\b",
            1.5,
        ),
        regex(
            r"\b(forget|forgot|forgetting|leak\w*|close|closing)\b.{0,30}\b(file handle|"
            r"connection|resource|lock|cursor|stream)s?\b",
            1.5,
        ),
        regex(r"\b(review|reviewer|critique|audit|look over|proofread)\b", 1.0),
        regex(
            r"\b(in|with) (this|my|the following) (loop|function|method|code|snippet|class|"
            r"script|regex|component)\b|\b(tests?|test cases) (would you write|should i write|"
            r"for (the|this|my|that))\b",
            2.0,
        ),
        regex(_CODE_PRESENT, 1.5),
        regex(
            r"\b(returns?|returning) (undefined|null|none|nan|the wrong|wrong)\b|\bundefined\b|"
            r"\bnull pointer\b|\bsegfault\w*|\bstack ?trace\b|\boff[- ]by[- ]one\b|"
            r"\bblows? up\b|\bcrash(es|ing)?\b|\bthrows?\b",
            1.5,
        ),
        regex(
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
        regex(
            r"\b(functions?|methods?|class(es)?|variables?|parameters?|decorators?|components?|"
            r"snippet|loops?|exceptions?|try/except|callbacks?|promises?|async|equals|"
            r"controller|python|javascript|typescript|java|rust|golang|c\+\+|react|bash|"
            r"dockerfile|code|regex|regexp|script)\b",
            1.0,
        ),
    ),
)
