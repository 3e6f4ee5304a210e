"""`hive usage`: the user's own figures as a table or JSON; a bad choice is one clear line."""

import json

from accounting import rollup
from tests.accounting.conftest import DAY, NOW, history  # noqa: F401  (fixture)


def test_usage_table_json_and_a_bad_date(hive, signed_in, owner, history):  # noqa: F811
    rollup.compute_day(DAY, NOW)
    signed_in(owner)
    result = hive("usage", "--by", "host", "--period", "day", "--from", "2026-03-10",
                  "--to", "2026-03-10")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].split() == [
        "2026-03-10", "node-1", "2.0", "0.0", "1.0", "1.0", "0.25", "0.09"
    ]  # fmt: skip
    result = hive("usage", "--from", "2026-03-10", "--to", "2026-03-10", "--json")
    assert [line["name"] for line in json.loads(result.output)] == ["owner"]
    result = hive("usage", "--from", "10/03/2026")
    assert result.exit_code == 1 and "YYYY-MM-DD" in result.output
