"""Nothing typed into a parameter or environment value runs as anything but one argument."""

import json
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from jobs import services, templating
from jobs.models import Task
from jobs.services import TaskSpec

from .conftest import wait_for

HOSTILE = [
    "$(id)",
    "`id`",
    "'",
    '"',
    "' ; touch {canary} ; '",
    "; touch {canary}",
    "a\nb",
    "line1\n$(touch {canary})\n",
    "$HOME ~ * ?",
    "\\",
    "",
    "--lr=0.1 --evil",
    "&& touch {canary} || touch {canary} | cat > {canary}",
]
ECHO_ARGS = f"{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"


def hostile_values(tmp_path):
    canary = tmp_path / "pwned"
    return canary, [v.replace("{canary}", str(canary)) for v in HOSTILE]


def test_render_quotes_every_value_as_one_shell_word():
    import shlex

    for value in HOSTILE:
        rendered = templating.render("prog --x {x} end", {"x": value})
        assert shlex.split(rendered) == ["prog", "--x", value, "end"]


def test_hostile_values_reach_the_program_as_literal_arguments(runner, node, tmp_path):
    canary, values = hostile_values(tmp_path)
    fields = {f"p{i}": v for i, v in enumerate(values)}
    template = ECHO_ARGS + " " + " ".join(f"{{{name}}}" for name in fields)
    spec = TaskSpec(host=node, template=template, parameters=fields)
    task = services.create_job(runner, name="quoting", specs=[spec]).tasks.get()
    task = services.spawn_task(task, runner)
    assert wait_for(lambda: services.sync_tasks([task]) or _ended(task))
    task.refresh_from_db()
    assert task.exit_code == 0, Path(task.log_path).read_text()
    assert json.loads(Path(task.log_path).read_text()) == values
    assert not canary.exists()


def test_hostile_environment_values_reach_the_program_literally(runner, node, tmp_path):
    canary, values = hostile_values(tmp_path)
    env = {f"V{i}": v for i, v in enumerate(values)}
    names = json.dumps(list(env))
    code = f"import json, os; print(json.dumps([os.environ[n] for n in {names}]))"
    show = f"{sys.executable} -c '{code}'"
    spec = TaskSpec(host=node, template=show, env=env)
    task = services.spawn_task(
        services.create_job(runner, name="env", specs=[spec]).tasks.get(), runner
    )
    assert wait_for(lambda: services.sync_tasks([task]) or _ended(task))
    assert json.loads(Path(task.log_path).read_text()) == values
    assert not canary.exists()


def _ended(task) -> bool:
    task.refresh_from_db()
    return task.status in Task.ENDED


@pytest.mark.parametrize("name", ["A-B", "1X", "X;id", "X=Y", ""])
def test_bad_environment_names_are_refused(runner, node, name):
    spec = TaskSpec(host=node, template="true", env={name: "1"})
    with pytest.raises(ValidationError, match="not a valid environment variable name"):
        services.create_job(runner, name="env", specs=[spec])
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("run {lr!r}", "not a field"),
        ("run {lr:>5}", "not a field"),
        ("run {a.b}", "not a field"),
        ("run {0}", "not a field"),
        ("run {", "not valid"),
        ("run {missing}", "No value for {missing}"),
    ],
)
def test_bad_templates_are_refused_and_change_nothing(runner, node, template, message):
    spec = TaskSpec(host=node, template=template, parameters={"lr": "1"})
    with pytest.raises(ValidationError, match=message):
        services.create_job(runner, name="bad", specs=[spec])
    assert not Task.objects.exists()


def test_literal_braces_are_written_doubled():
    assert templating.render("awk '{{print $1}}' {f}", {"f": "a b"}) == "awk '{print $1}' 'a b'"


@pytest.mark.parametrize(
    ("template", "where"),
    [
        ('echo "{x}"', "inside quotes"),
        ("python -c 'print(\"{x}\")'", "inside quotes"),
        ('sh -c "echo {x}"', "inside quotes"),
        ("echo $'a {x}'", "inside quotes"),
        ("echo \\{x}", "right after a backslash"),
        ("echo ${x}", "right after a \\$"),
        ("cat <<EOF\n{x}\nEOF", "here-document"),
    ],
)
def test_a_field_where_a_value_would_not_stay_one_argument_is_refused(template, where):
    # Filled in, the value's own quotes would end the template's: $(id) would run.
    with pytest.raises(ValidationError, match=where):
        templating.fields_of(template)


@pytest.mark.parametrize(
    "template",
    [
        "prog --lr={x} \"literal\" 'also literal'",
        "awk '{{print $1}}' {x}",
        "cat <<< {x}",
        "sh -c 'echo \"$1\"' sh {x}",
        "echo \\\\ {x} $(basename {x})",
        "echo \\${x} $HOME/{x}",
    ],
)
def test_fields_after_closed_quotes_and_escapes_are_arguments(template):
    assert templating.fields_of(template) == ["x"]


def test_a_refused_template_creates_no_job(runner, node):
    spec = TaskSpec(host=node, template='python -c "print({x})"', parameters={"x": "1"})
    with pytest.raises(ValidationError, match="inside quotes"):
        services.create_job(runner, name="quoted", specs=[spec])
    assert not Task.objects.exists()
