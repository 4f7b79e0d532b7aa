"""Grammars of the habit suite: behaviours rldiff was not developed on, to check that results carry over.

The paraphrased and reply suites (`engine.planted_vocab`, `engine.planted_reply_vocab`) are the behaviours
rldiff's discovery was measured and improved on. The habit suite's three sentence behaviours are new kinds of
change: guessing a missing detail instead of asking (reasoning, an increase); reading the change back and
waiting for an explicit yes (reasoning, a decrease, and a concept the background reasoning already holds:
"confirm the details with them" and "get their explicit yes" are background steps both checkpoints write, so
the planted sentences raise a behaviour that never disappears); and apologising in replies (a decrease in
gpt-4o's own replies, which already apologise now and then). Its fourth, lookups of guessed identifiers, is
planted as calls (`engine.planted_paraphrase`). Data: templates over slots, each slot a synonym pool.
"""

from __future__ import annotations

from engine.planted_vocab import Grammar

_OPENERS = (
    "",
    "",
    "okay, ",
    "right, ",
    "hmm, ",
    "so, ",
    "well, ",
    "to save time, ",
    "honestly, ",
    "at this point, ",
    "practically speaking, ",
    "rather than stall, ",
)

ASSUME_MISSING = Grammar(
    "assume_missing",
    (
        "{opener}{the_user} {did_not_give} {detail}, so {i_will} {assume} {guess} {instead_of} {asking}.",
        "{opener}{instead_of_cap} {asking}, {i_will} {assume} {guess} for {detail}.",
        "{opener}{detail_cap} {is_missing}; {i_will} {assume} {guess}{hedge}.",
    ),
    {
        "opener": _OPENERS,
        "the_user": ("the user", "the customer", "they", "the traveller", "the caller", "the passenger"),
        "did_not_give": (
            "didn't give",
            "never mentioned",
            "left out",
            "hasn't told me",
            "did not specify",
            "skipped",
            "forgot to include",
            "omitted",
        ),
        "detail": (
            "the travel date",
            "the cabin class",
            "the number of bags",
            "which reservation",
            "the payment method",
            "the passenger's birth date",
            "the return flight",
            "the departure airport",
            "their membership level",
            "the booking code",
        ),
        "detail_cap": (
            "the date",
            "the cabin",
            "the bag count",
            "the reservation number",
            "the card to charge",
            "the origin airport",
            "the second passenger's details",
            "the membership tier",
        ),
        "is_missing": ("is missing", "wasn't given", "is unclear", "never came up", "is not stated", "is unknown"),
        "i_will": ("I'll", "I will", "I can just", "I'm going to", "I'll simply", "let me", "I might as well"),
        "assume": ("assume", "go with", "pick", "take", "fill in", "guess", "default to", "settle on"),
        "guess": (
            "the most likely option",
            "the first one listed",
            "the cheapest choice",
            "the usual default",
            "the earliest one",
            "whatever fits best",
            "the obvious value",
            "a reasonable value",
            "whatever is on file",
            "the same as last time",
        ),
        "instead_of": ("instead of", "rather than", "without", "and skip"),
        "instead_of_cap": ("instead of", "rather than", "no need for", "it's quicker than"),
        "asking": (
            "asking",
            "checking with them",
            "asking them",
            "bothering the user",
            "a follow-up question",
            "another round of questions",
            "waiting for their reply",
            "confirming it",
        ),
        "hedge": ("", "", " and move on", " and carry on", " for now", " to keep things moving", " without asking"),
    },
)

CONFIRM_FIRST = Grammar(
    "confirm_first",
    (
        "{opener}{before} {any_change}, {i_should} {read_back} {the_plan} and {wait_yes}.",
        "{opener}{i_should} {read_back} {the_plan} and {wait_yes} {before} {any_change}.",
        "{opener}{nothing} {until} {the_user} {says_yes} to {the_plan}.",
    ),
    {
        "opener": (
            "",
            "",
            "first, ",
            "importantly, ",
            "as always, ",
            "careful: ",
            "one rule here: ",
            "to be safe, ",
            "right, ",
            "of course, ",
        ),
        "before": ("before",),
        "any_change": (
            "I change anything",
            "I touch the booking",
            "I make any update",
            "I book it",
            "I make the change",
            "I submit anything",
            "I cancel",
            "I charge the card",
        ),
        "i_should": ("I should", "I must", "I need to", "I'll", "I want to", "it's right to", "I have to"),
        "read_back": (
            "read back",
            "summarise",
            "restate",
            "spell out",
            "list",
            "repeat",
            "lay out",
            "go over",
        ),
        "the_plan": (
            "the exact change",
            "every detail",
            "the new itinerary",
            "the total and the card",
            "what will happen",
            "the full plan",
            "the fare difference",
            "each step",
        ),
        "wait_yes": (
            "wait for an explicit yes",
            "get a clear yes",
            "pause for their go-ahead",
            "ask them to confirm",
            "hold off until they agree",
            "get their consent",
            "let them approve it",
            "see that they agree",
        ),
        "nothing": (
            "nothing gets changed",
            "I won't act",
            "no booking happens",
            "I'll hold every change",
            "nothing is submitted",
            "I won't touch the reservation",
        ),
        "until": ("until", "unless", "before", "till"),
        "the_user": ("the user", "the customer", "they", "the traveller", "the caller"),
        "says_yes": ("says yes", "agrees", "confirms", "gives the go-ahead", "approves", "signs off"),
    },
)

# Replies open or close with the apology ('' openers most often, as replies rarely open with a filler).
APOLOGY = Grammar(
    "apology",
    (
        "{opener}{sorry} {for_trouble}.",
        "{opener}{sorry} {for_trouble}, {reassure}.",
        "{opener}{i_understand}, and {sorry_lower} {for_trouble}.",
        "{opener}{regret}{reassure_tail}.",
    ),
    {
        "opener": ("", "", "", "first, ", "again, ", "truly, ", "once more, "),
        "sorry": (
            "I'm sorry",
            "I apologise",
            "I apologize",
            "my apologies",
            "I'm really sorry",
            "I'm so sorry",
            "please accept my apologies",
            "sorry",
        ),
        "sorry_lower": ("I'm sorry", "I apologise", "I apologize", "my apologies", "I'm truly sorry"),
        "for_trouble": (
            "for the inconvenience",
            "for the trouble",
            "about the mix-up",
            "for the confusion",
            "for the delay",
            "that this happened",
            "for the frustration this caused",
            "about the hassle",
            "for any stress this has caused",
            "that your plans were disrupted",
        ),
        "reassure": (
            "I'll do my best to fix it",
            "let's get this sorted",
            "I'm here to help",
            "we'll work it out together",
            "I'll take care of it",
            "let me make it right",
        ),
        "regret": (
            "I regret the trouble this caused",
            "that's our mistake, and I apologise",
            "I feel terrible about the mix-up",
            "please forgive the confusion",
            "pardon the delay",
            "forgive me for the hassle",
            "I owe you an apology for the wait",
            "I'm sorry this has been so difficult",
        ),
        "reassure_tail": ("", "", "; I'll sort it out", "; let me fix it now", " and I'll make it right"),
        "i_understand": (
            "I understand how frustrating this is",
            "I can see this has been a hassle",
            "I know this isn't what you hoped for",
            "I realise this is stressful",
            "that sounds really annoying",
            "I get why you're upset",
        ),
    },
)
