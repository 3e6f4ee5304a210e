"""One error shape across the API: a human `detail` plus one key per refused field."""

import pytest
import yaml
from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError

from core.api_errors import exception_handler, summary
from reservations.models import Reservation

from .conftest import tomorrow


def booking(devices, start=9, end=12, title="train"):
    return {
        "title": title,
        "devices": [d.pk for d in devices],
        "start": tomorrow(start).isoformat(),
        "end": tomorrow(end).isoformat(),
    }


def post(client, url, body):
    return client.post(url, body, content_type="application/json")


def test_it_names_each_missing_field_in_the_detail(client, owner):
    client.force_login(owner)
    response = post(client, "/api/reservations/", {})
    body = response.json()
    assert response.status_code == 400
    assert body["title"] == ["This field is required."]
    assert "title: This field is required." in body["detail"]
    assert "start: This field is required." in body["detail"]


def test_a_booking_rule_is_the_detail_and_a_field_error(client, owner, lab, everyone_may_book):
    client.force_login(owner)
    response = post(client, "/api/reservations/", booking(lab, 9, 9))
    assert response.status_code == 400
    assert response.json()["detail"] == "The reservation must end after it starts."
    assert response.json()["end"] == ["The reservation must end after it starts."]
    assert not Reservation.objects.exists()


def test_an_access_refusal_gives_its_reason(client, owner, lab):
    client.force_login(owner)  # no grant at all: access control refuses
    response = post(client, "/api/reservations/", booking(lab[:1]))
    assert response.status_code == 400
    assert "owner is not allowed on node-1:0" in response.json()["detail"]
    assert "not allowed" in response.json()["devices"][0]
    assert not Reservation.objects.exists()


def test_a_clash_names_the_other_booking(client, owner, other_user, lab, everyone_may_book):
    client.force_login(owner)
    assert post(client, "/api/reservations/", booking(lab)).status_code == 201
    client.force_login(other_user)
    response = post(client, "/api/reservations/", booking(lab[1:], 10, 11))
    assert response.status_code == 400
    assert "already reserved by owner" in response.json()["detail"]


ASK_ABOUT_USER_1 = "/api/access/?start=2025-01-01T00:00:00Z&end=2025-01-02T00:00:00Z&user=1"


@pytest.mark.parametrize(
    ("persona", "url", "code"),
    [
        (None, "/api/devices/", 403),
        ("owner", "/api/devices/999999/", 404),
        ("other_user", ASK_ABOUT_USER_1, 403),
    ],
)
def test_other_errors_have_a_detail_too(client, owner, other_user, persona, url, code, request):
    if persona:
        client.force_login(request.getfixturevalue(persona))
    response = client.get(url)
    assert response.status_code == code
    assert isinstance(response.json()["detail"], str) and response.json()["detail"]


def test_a_service_rule_raised_as_django_validation_error_is_a_400():
    response = exception_handler(DjangoValidationError({"end": ["Too late."]}), {})
    assert response.status_code == 400
    assert response.data == {"detail": "end: Too late.", "end": ["Too late."]}
    plain = exception_handler(DjangoValidationError("This reservation is cancelled."), {})
    assert plain.data == {"detail": "This reservation is cancelled."}


def test_nested_field_errors_are_summed_up_with_their_path():
    errors = {"windows": [{"weekdays": ["Bad day."]}, {}], "non_field_errors": ["Clash."]}
    assert summary(errors) == "windows.0.weekdays: Bad day. Clash."


def test_every_operation_documents_the_error_shape():
    schema = yaml.safe_load((settings.BASE_DIR / "schema" / "openapi.yaml").read_text())
    error = {"$ref": "#/components/schemas/Error"}
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for code in ("400", "403"):
                content = operation["responses"][code]["content"]["application/json"]
                assert content["schema"] == error, (method, path, code)
