#!/usr/bin/env python3
"""calc - evaluate an arithmetic expression, safely.

Arguments: {"expression": string}
Result:    {"ok": number}

The expression is parsed with ast and only numbers, the constants pi, e and
tau, parentheses, unary + and -, and the binary operators + - * / // % ** are
evaluated; nothing is ever passed to eval(). Limits keep a hostile
expression from eating the machine: at most 1000 characters, and no integer
result over 4096 bits.

A malformed or disallowed expression is the caller's mistake and is answered
with {"error": "..."}. An arithmetic failure while evaluating (division by
zero) is left to raise on purpose: the SDK reports it as {"raised": ...},
which shows how the daemon turns an exception into a handler_raised error.
"""

import ast
import math
import operator

from toolexec.worker import error, serve

MAX_LENGTH = 1000
MAX_INT_BITS = 4096

CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}

BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}

UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class Rejected(Exception):
    """The expression is not something calc evaluates."""


def _check_size(value):
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise Rejected("result too large (over %d bits)" % MAX_INT_BITS)
    return value


def _pow(base, exp):
    # Estimate before computing: 10 ** 10 ** 10 would otherwise run until the
    # daemon's timeout kills us.
    if isinstance(base, int) and isinstance(exp, int) and exp > 0 and abs(base) > 1:
        if (abs(base).bit_length() - 1) * exp > MAX_INT_BITS:
            raise Rejected("result too large (over %d bits)" % MAX_INT_BITS)
    return operator.pow(base, exp)


def evaluate(node):
    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant):
        # bool is an int subclass; True + 1 is not arithmetic we offer.
        if type(node.value) in (int, float):
            return node.value
        raise Rejected("unsupported literal %r" % (node.value,))
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        raise Rejected("unknown name %r" % node.id)
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return UNARY[type(node.op)](evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left, right = evaluate(node.left), evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            return _check_size(_pow(left, right))
        return _check_size(BINARY[type(node.op)](left, right))
    raise Rejected("unsupported syntax: %s" % type(node).__name__)


def handler(arguments):
    unknown = sorted(set(arguments) - {"expression"})
    if unknown:
        return error("unknown argument %r (expected only 'expression')" % unknown[0])
    expression = arguments.get("expression")
    if not isinstance(expression, str):
        return error("argument 'expression' must be a string")
    if len(expression) > MAX_LENGTH:
        return error("expression longer than %d characters" % MAX_LENGTH)
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        value = evaluate(tree)
    except SyntaxError as exc:
        return error("invalid expression: %s" % exc.msg)
    except Rejected as exc:
        return error("invalid expression: %s" % exc)
    except (RecursionError, MemoryError):
        return error("invalid expression: too deeply nested")
    if isinstance(value, complex):  # (-8) ** 0.5
        return error("result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        return error("result is not finite")
    return value  # a plain value is the ok result


if __name__ == "__main__":
    serve(handler)
