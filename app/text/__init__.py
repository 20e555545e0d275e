"""Text front end: cleaning the input before it reaches the prompt."""
