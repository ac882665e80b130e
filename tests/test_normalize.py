from lakejoin.normalize import normalize_set, normalize_value


def test_text_is_nfkc_trimmed_collapsed_and_lowercased():
    assert normalize_value("  Ｎew\t  York ") == "new york"


def test_numbers_have_one_canonical_form():
    assert normalize_value("2019.0") == normalize_value(2019) == normalize_value(2019.0) == "2019"
    assert normalize_value("0.50") == "0.5"
    assert normalize_value("1e3") == "1000"
    assert normalize_value("007") == "007"  # leading zeros mark identifiers (ZIP, FIPS)


def test_null_like_values_are_dropped():
    assert normalize_value("  ") is None
    assert normalize_value("N/A") is None
    assert normalize_value(float("nan")) is None
    assert normalize_set(["a", "A ", None, "", "NULL", "b"]) == {"a", "b"}
