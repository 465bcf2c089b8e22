"""Strategy source strings shared by the engine and executor tests."""

SMA_CROSS = """
import backtrader as bt


class SmaCross(bt.Strategy):
    params = dict(fast=10, slow=30, target=0.95)

    def __init__(self):
        fast = bt.ind.SMA(self.data.close, period=self.p.fast)
        slow = bt.ind.SMA(self.data.close, period=self.p.slow)
        self.cross = bt.ind.CrossOver(fast, slow)

    def next(self):
        if not self.position and self.cross[0] > 0:
            self.order_target_percent(target=self.p.target)
        elif self.position and self.cross[0] < 0:
            self.close()
"""

# Tries to buy on every bar from the very first one: shows the warm-up gate.
BUY_EVERY_BAR = """
import backtrader as bt


class Eager(bt.Strategy):
    def next(self):
        if not self.position:
            self.buy(size=10)
"""

RAISES_IN_NEXT = """
import backtrader as bt


class Broken(bt.Strategy):
    def next(self):
        ratio = 1 / 0
"""

TWO_STRATEGIES = """
import backtrader as bt


class A(bt.Strategy):
    pass


class B(bt.Strategy):
    pass
"""

NO_STRATEGY = """
import backtrader as bt

x = 1
"""

SYNTAX_ERROR = """
import backtrader as bt

class S(bt.Strategy):
    def next(self)
        pass
"""

ENDLESS = """
import backtrader as bt


class Spin(bt.Strategy):
    def next(self):
        while True:
            pass
"""

EXITS_PROCESS = """
import os

import backtrader as bt


class Killer(bt.Strategy):
    def next(self):
        os._exit(1)
"""

SYS_EXIT = """
import sys

import backtrader as bt


class Quitter(bt.Strategy):
    def next(self):
        sys.exit(3)
"""
