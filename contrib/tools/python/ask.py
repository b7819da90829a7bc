#!/usr/bin/env python3
"""ask - hand a question to the user (the ask_user handler result).

Arguments: {"question": string, "choices": [string, ...]}   (choices optional)
Result:    {"ask_user": question, "opts": {"choices": [...]}}

The daemon does not wait for an answer: the call's content becomes
"<awaiting user response>", the batch's "halt" names the question, and the
agent asks its user before continuing the conversation.
"""

from toolexec.worker import ask_user, error, serve, tool


@tool
def ask(arguments):
    unknown = sorted(set(arguments) - {"question", "choices"})
    if unknown:
        return error("unknown argument %r" % unknown[0])
    question = arguments.get("question")
    if not isinstance(question, str) or not question:
        return error("argument 'question' must be a non-empty string")
    choices = arguments.get("choices")
    if choices is None:
        return ask_user(question)
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        return error("argument 'choices' must be an array of strings")
    return ask_user(question, {"choices": choices})


if __name__ == "__main__":
    serve()
