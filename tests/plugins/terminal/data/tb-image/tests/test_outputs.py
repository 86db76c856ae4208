from pathlib import Path

CONF = Path("/app/app.conf")


def lines():
    return CONF.read_text().splitlines() if CONF.exists() else []


def test_port_changed():
    assert "port = 9090" in lines()


def test_old_port_gone():
    assert CONF.exists() and "port = 8080" not in lines()


def test_other_lines_kept():
    assert [line for line in lines() if not line.startswith("port")] == [
        "name = demo", "workers = 4"]
