"""The one error type the model raises for input it refuses."""

from __future__ import annotations


class ModelError(ValueError):
    """Input the specification does not allow.

    `where` names the function or step, `field` the offending input, so a caller can say
    exactly what was refused and where.
    """

    def __init__(self, where: str, field: str, message: str) -> None:
        self.where = where
        self.field = field
        self.message = message
        super().__init__(f"{where}: {field}: {message}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        # Pickled by its three fields (a proof worker process sends it back to the runner).
        return (type(self), (self.where, self.field, self.message))


def require_int(where: str, field: str, value: object, *, minimum: int | None = 0) -> None:
    """Refuse a non-integer (bool included) or a value below `minimum`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ModelError(where, field, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ModelError(where, field, f"must be >= {minimum}, got {value}")


def require_opt_int(where: str, field: str, value: object, *, minimum: int | None = 0) -> None:
    if value is not None:
        require_int(where, field, value, minimum=minimum)
