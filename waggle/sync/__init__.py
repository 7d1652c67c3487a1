"""``waggle sync``: bring a federated member's tables into the primary, as mirrors or copies, idempotently."""
