# The one error the codec raises. Every malformed or unencodable input ends here,
# with a message that says what is wrong and the rule it breaks: an MQTT 3.1.1
# statement id ("MQTT-3.1.2-22") or, where the standard has none, its section ("§2.2.3").


class CodecError(ValueError):
    @property
    def rule(self):
        # The text between the last "[" and "]" of the message, or "".
        m = self.args[0] if self.args else ""
        i = m.rfind("[")
        return m[i + 1:-1] if i >= 0 and m.endswith("]") else ""


def fail_as(key, *values):
    """Raise the error named by key in reasons.TEXT (loaded now, not at import)."""
    try:
        from .reasons import text
        m = text(key, values)
    except MemoryError:  # no room for the table: the key still says what broke
        m = key
    raise CodecError(m)
