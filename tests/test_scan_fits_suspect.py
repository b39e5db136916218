"""The FITS header pre-check (fits_scaling.suspect_free) never passes over text the suspect-card
regex matches: random header text over the characters the regex's words are made of, with the
regex itself as the truth."""

import random

import pytest

from fpclass.scan.readers import fits_scaling

ALPHABET = b"NnAaIiFfEeDd0123456789+-. =/'XYZ"


@pytest.mark.parametrize("seed", range(4))
def test_suspect_free_only_where_the_regex_finds_nothing(seed):
    rng = random.Random(seed)
    matched = 0
    for _ in range(20000):
        text = bytes(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 14)))
        if fits_scaling._SUSPECT.search(text):
            matched += 1
            assert not fits_scaling.suspect_free(text), text
    assert matched > 100  # the strings reach the regex's words


@pytest.mark.parametrize("text", [b"0" * 300, b"X = " + b"9" * 301, b"1.5D+300", b"1e999",
                                  b"nan", b"-Inf", b"E+123"])
def test_suspect_free_says_no_to_each_of_the_regexs_words(text):
    assert fits_scaling._SUSPECT.search(text)
    assert not fits_scaling.suspect_free(text)
