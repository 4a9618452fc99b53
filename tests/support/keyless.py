"""Cells of the keyless notebook that the nbclient test and the browser test both run: the same
points (issue 26's small frictions), seen through two front ends."""

FILES_AND_DATA = [  # the offline model lists then reads files; --data takes a folder, and bare says how
    ("files1", "%%agent files\nTell me about the missions"),
    ("files2", "%%agent files\nWhat does notes.txt say?"),
    ("folder", "%%agent --data data/\nWhich agency has the most missions?"),
    ("bare", "%%agent --data\nWhich planet?"),
]
PRICES_AND_TYPOS = [  # the price warning once, on a priced model only; did-you-mean; --help
    ("price1", "%%agent priced\nhello"),
    ("price2", "%%agent priced --data moons\nHow many moons?"),
    ("price3", "%%agent priced --notebook\nAnd the cells?"),
    ("typo", "%%agent --aprove\nhi"),
    ("command", "%agent usgae"),
    ("help", "%%agent --help"),
]
