"""Knob assignments from Python: text parsed once by pmlab's own parser, the same text back
from str(), and a ValueError (PmlabError) that says what is wrong with bad text."""

import pytest

import pmlab


def test_good_text_parses_into_its_parts_and_back():
    a = pmlab.Assignment("cpuidle.POLL.disable@0-1=1")
    assert (a.knob, a.cpus, a.value) == ("cpuidle.POLL.disable", [0, 1], "1")
    assert str(a) == "cpuidle.POLL.disable@0-1=1"
    assert pmlab.Assignment(str(a)) == a
    b = pmlab.Assignment("haltpoll.guest_halt_poll_ns=200us")
    assert (b.knob, b.cpus, b.value) == ("haltpoll.guest_halt_poll_ns", None, "200us")
    assert len({a, b, pmlab.Assignment("cpuidle.POLL.disable@0,1=1")}) == 2


@pytest.mark.parametrize(
    "text, why",
    [
        ("rcu.expedited", r"expected NAME\[@CPUS\]=VALUE"),
        ("=1", r"expected NAME\[@CPUS\]=VALUE"),
        ("@1=1", "no knob name"),
        ("cpu.online@x=0", "bad CPUs after `@`: 'x' is not a CPU list"),
        ("cpu.online@3-1=0", "runs backwards"),
    ],
)
def test_bad_text_is_a_value_error_saying_why(text, why):
    with pytest.raises(ValueError, match=why) as e:
        pmlab.Assignment(text)
    assert isinstance(e.value, pmlab.PmlabError)
    assert text in str(e.value)
