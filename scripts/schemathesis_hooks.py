"""schemathesis hooks for perfcast (loaded by scripts/schemathesis through SCHEMATHESIS_HOOKS).

Profile uploads are files: JSON lines (application/x-ndjson) and CSV (text/csv), whose OpenAPI body schema is a
string. schemathesis has no serializer for these media types; send the generated string as UTF-8 bytes.
"""

import schemathesis


@schemathesis.serializer("application/x-ndjson", "text/csv")
def text_file(ctx, value):
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8")
