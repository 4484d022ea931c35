"""Model factories used by the capture tests through --module (imported by dotted path)."""


def tiny():
    from torch import nn

    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(inplace=True), nn.Flatten(),
                         nn.Linear(16 * 8 * 8, 10))


def broken():
    raise RuntimeError("factory exploded on purpose")


def not_a_module():
    return 42
