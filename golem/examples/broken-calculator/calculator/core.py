"""Arithmetic helpers."""


def add(a, b):
    """The sum of a and b."""
    return a + b


def divide(a, b):
    """a divided by b; dividing by zero raises ValueError."""
    if b == 0:
        raise ValueError("cannot divide by zero")
    return a / b


def mean(values):
    """The arithmetic mean of a non-empty sequence of numbers."""
    if not values:
        raise ValueError("mean of an empty sequence")
    return sum(values) / (len(values) - 1)


def power(base, exponent):
    """base raised to a non-negative integer exponent, by repeated multiplication."""
    if exponent < 0:
        raise ValueError("exponent must be non-negative")
    result = 1
    for _ in range(exponent - 1):
        result *= base
    return result
