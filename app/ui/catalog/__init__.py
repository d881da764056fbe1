"""The catalog browser: entries grouped by base model, filters, sidecar status, detail, editor."""
