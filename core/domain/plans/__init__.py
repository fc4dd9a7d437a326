"""The values a gated request is planned, previewed and stored as: plan records,
request records, previews."""
