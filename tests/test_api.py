from decimal import Decimal

import pytest

from kaid.api.config import SchedulerConfig, load_config
from kaid.api.crds import QueueSpec
from kaid.api.duration import parse_duration
from kaid.api.quantity import QuantityError, parse_quantity, to_int, to_milli


@pytest.mark.parametrize(("text", "value"), [
    ("500m", Decimal("0.5")), ("2", Decimal(2)), ("1Gi", Decimal(2**30)), ("64G", Decimal(64 * 10**9)),
    ("1e3", Decimal(1000)), (3, Decimal(3)), ("1.5", Decimal("1.5")), ("100Mi", Decimal(100 * 2**20)),
])
def test_parse_quantity(text: object, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["abc", "", "1Zi", "--1", None, True, "nan"])
def test_parse_quantity_rejects(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_units_round_up() -> None:
    assert to_milli("0.0001") == 1
    assert to_milli("250m") == 250
    assert to_int("1.5") == 2


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25),
                                               ("-1s", -1), ("0", 0), (12, 12)])
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["5 minutes", "m5", "", "1x"])
def test_parse_duration_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(bad)


def test_queue_spec_defaults_and_validation() -> None:
    spec = QueueSpec.model_validate({})
    assert spec.priority == 100
    with pytest.raises(ValueError, match="use -1 for unlimited"):
        QueueSpec.model_validate({"resources": {"gpu": {"quota": -2}}})
    with pytest.raises(ValueError, match="below quota"):
        QueueSpec.model_validate({"resources": {"gpu": {"quota": 8, "limit": 4}}})


def test_config_file_errors_name_the_field(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    p = Path(str(tmp_path)) / "c.yaml"
    p.write_text("placement: {gpu: tightest}\n")
    with pytest.raises(ValueError, match=r"placement.gpu"):
        load_config(p)
    p.write_text("cyclePeriodSecs: 3\n")
    with pytest.raises(ValueError, match="cyclePeriodSecs"):
        load_config(p)
    p.write_text("placement: {gpu: spread}\n")
    assert load_config(p).placement.gpu == "spread"
    assert load_config(None) == SchedulerConfig()


def test_config_unknown_key_suggests_the_right_one(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    p = Path(str(tmp_path)) / "c.yaml"
    p.write_text("cyclePeriod: 3\nplacement: {gangSolvr: greedy}\n")
    with pytest.raises(ValueError, match=r"did you mean placement\.gangSolver\?.*did you mean cyclePeriodSeconds"):
        load_config(p)
