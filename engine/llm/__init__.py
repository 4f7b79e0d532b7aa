"""LLM access: a client protocol, the Anthropic client, a response cache, cost accounting and prompts."""
