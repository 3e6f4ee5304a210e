"""Times as people type them: bad ones are a sentence, never a traceback."""

import pytest
from hive_cli.when import BadTime, parse_when


@pytest.mark.parametrize("text", ["+99999999d", "+9999999999h"])
def test_a_time_past_the_calendar_is_refused_plainly(text):
    with pytest.raises(BadTime, match="too far away"):
        parse_when(text)
