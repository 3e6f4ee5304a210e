"""The production profile passes `manage.py check --deploy`; the embedded one stays plain HTTP."""

import os
import subprocess
import sys

from tests.test_profiles import ROOT, settings_in_subprocess

PRODUCTION_ENV = {
    "PUBLIC_URL": "https://gpus.lab.example.org",
    "ALLOWED_HOSTS": "gpus.lab.example.org",
    "HIVE_BEHIND_PROXY": "1",
}


def check_deploy(data_dir, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env={**clean, "HIVE_DATA_DIR": str(data_dir), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_check_deploy_is_clean_in_the_production_profile(tmp_path):
    result = check_deploy(tmp_path, **PRODUCTION_ENV)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "no issues" in output, output


def test_the_embedded_profile_is_what_check_deploy_warns_about(tmp_path):
    """The check is not vacuous: over plain http the same command names the missing parts."""
    output = check_deploy(tmp_path).stderr
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in output


def test_each_part_can_be_set_on_its_own(tmp_path):
    values = settings_in_subprocess(
        tmp_path,
        "SECURE_SSL_REDIRECT",
        "SECURE_HSTS_SECONDS",
        "SESSION_COOKIE_SECURE",
        "CSRF_TRUSTED_ORIGINS",
        "FORCE_SCRIPT_NAME",
        "STATIC_URL",
        "SESSION_COOKIE_PATH",
        **PRODUCTION_ENV,
        SECURE_SSL_REDIRECT="0",
        SECURE_HSTS_SECONDS="600",
        HIVE_URL_PREFIX="/gpus/",
    )
    assert values == [
        "False",
        "600",
        "True",
        "['https://gpus.lab.example.org']",
        "'/gpus'",
        "'/gpus/static/'",
        "'/gpus'",
    ]


def test_a_sub_path_in_the_public_url_is_the_prefix_and_not_part_of_the_origin(tmp_path):
    values = settings_in_subprocess(
        tmp_path,
        "FORCE_SCRIPT_NAME",
        "CSRF_TRUSTED_ORIGINS",
        "SECURE_PROXY_SSL_HEADER",
        "USE_X_FORWARDED_HOST",
        PUBLIC_URL="https://lab.example.org/gpus/",
        HIVE_BEHIND_PROXY="1",
    )
    assert values == [
        "'/gpus'",
        "['https://lab.example.org']",
        "('HTTP_X_FORWARDED_PROTO', 'https')",
        "True",
    ]


def test_the_embedded_profile_is_served_at_the_root_over_http(tmp_path):
    values = settings_in_subprocess(
        tmp_path, "FORCE_SCRIPT_NAME", "STATIC_URL", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS"
    )
    assert values == ["None", "'/static/'", "False", "0"]
