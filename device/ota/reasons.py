# The texts of fleetwire.ota's refusals and failures, loaded only when one happens (the
# codec's reasons.text() formats them; same table format as fleetwire.reasons). The key is
# what the vitals record's ota.code says, for a program; the text is for a person.
TEXT = """
manifest  . the offer is not a release manifest: %s
board     . release %s is for board kind %r; this board is %r
kind      . release %s is a %s update, which this board cannot take: %s
space     . release %s needs %d bytes; %s has %d
packet    . max_packet %d leaves no room for update chunks on topic %s; give the client a larger max_packet
truncated . the update service ended release %s at %d bytes, the manifest says %d (a truncated image, or a wrong size); nothing switched
past_end  . a chunk of release %s runs to byte %d, past the %d bytes of its manifest (a wrong size in the manifest); nothing switched
sha256    . release %s: the SHA-256 of the %d bytes received is %s..., the manifest says %s... (corrupted on the way, or in the image); nothing switched
bundle    . release %s is not a well-formed app bundle: %s; nothing switched
image     . release %s: the firmware image does not verify (%s); nothing switched
io        . release %s: flash error (%s) while %s; nothing switched
revert    . cannot go back to %s: the release before this one here is %s
rolled    . release %s was rolled back here before (%s); offer it with "retry": true to try it again
unsigned  . %s is not signed; this board takes only what a release-signing key it trusts signed (fleetwire rollout --release-keys)
nokeys    . %s: this board holds no release-signing key (ota/keys.json); give it the fleet's with fleetwire deploy --release-keys, or publish them (fleetwire release publish)
key       . %s is signed by key %s, which this board does not trust (it trusts %s)
signature . %s: the signature by key %s does not match its manifest (changed after it was signed, or forged); nothing downloaded
older     . release %s is older than %s, which runs here; a downgrade is taken only as a signed rollback naming %s
replay    . %s is older than this board's key set %d (a replay); the board keeps its keys
"""


def text(key, *values):
    from ..codec.reasons import text as fmt

    try:
        return fmt(key, values, TEXT)
    except (ValueError, TypeError):  # a bad value must not hide the refusal itself
        return key
