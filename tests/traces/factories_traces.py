"""Model factories used by the capture tests through --module (imported by dotted path)."""


def tiny():
    from torch import nn

    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(inplace=True), nn.Flatten(),
                         nn.Linear(16 * 8 * 8, 10))


def broken():
    raise RuntimeError("factory exploded on purpose")


def not_a_module():
    return 42


def user_net():
    """A user's own model (not in the zoo): every kind of layer whose parameters a profile's shapes give.

    Parameters: conv 4*3*3*3 + 4 = 112, batch norm 2*4 = 8, linear 144*10 + 10 = 1450, linear without
    bias 10*5 = 50, layer norm 2*5 = 10; 1630 in all (ReLU and Flatten own none).
    """
    from torch import nn

    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(144, 10),
                         nn.Linear(10, 5, bias=False), nn.LayerNorm(5))
