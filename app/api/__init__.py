"""HTTP layer: routes, wire schemas and the OpenAI error envelope."""
