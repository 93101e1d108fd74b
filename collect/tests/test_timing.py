"""S1's timing statistic (mean of the middle 5 of 10 sorted samples, by hand) and the measuring loop."""

import unittest

from perfcast_collect import timing


class MiddleMean(unittest.TestCase):
    def test_s1_rule_by_hand(self):
        # sorted: 1 2 3 4 5 6 7 8 9 10 → drop 1, 2 and 8, 9, 10 → (3+4+5+6+7)/5 = 5
        self.assertEqual(timing.middle_mean([10, 1, 9, 2, 8, 3, 7, 4, 6, 5]), 5.0)
        # outliers on both sides do not move it: sorted 1 2 | 3 4 5 6 7 | 8 100 1000 → 5
        self.assertEqual(timing.middle_mean([100, 1, 2, 3, 4, 5, 6, 7, 8, 1000]), 5.0)
        # a cold first sample: 500 3 3 3 3 3 4 4 4 4 → sorted 3 3 | 3 3 3 4 4 | 4 4 500 → (3+3+3+4+4)/5 = 3.4
        self.assertAlmostEqual(timing.middle_mean([500, 3, 3, 3, 3, 3, 4, 4, 4, 4]), 3.4)
        # window is sorted[2:7], i.e. 0-based ranks 2..6
        self.assertEqual(timing.middle_mean([0.0, 0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 99.0, 99.0, 99.0]), 30.0)

    def test_fewer_samples(self):
        self.assertEqual(timing.middle_mean([7.0]), 7.0)
        self.assertEqual(timing.middle_mean([4, 2, 6]), 4.0)  # fewer than 5: all of them
        # 6 samples: start (6-5)//2 = 0 → sorted 1 2 3 4 5 | 60 → 3
        self.assertEqual(timing.middle_mean([60, 5, 4, 3, 2, 1]), 3.0)
        with self.assertRaises(ValueError):
            timing.middle_mean([])

    def test_defaults_are_s1s(self):
        self.assertEqual((timing.WARMUP, timing.ITERS, timing.KEEP), (10, 10, 5))


class FakeTimer:
    """Returns canned samples and records how it was used."""

    def __init__(self, samples):
        self.samples = samples
        self.syncs = 0
        self.timed_calls = 0

    def sync(self):
        self.syncs += 1

    def time_iterations(self, fn, iters):
        for _ in range(iters):
            fn()
            self.timed_calls += 1
        return self.samples[:iters]


class Measure(unittest.TestCase):
    def test_warmup_then_timed_then_statistic(self):
        calls = []
        timer = FakeTimer([10, 1, 9, 2, 8, 3, 7, 4, 6, 5])
        m = timing.measure(lambda: calls.append(1), timer)
        self.assertEqual(len(calls), 20)  # 10 warm-up + 10 timed
        self.assertEqual(timer.timed_calls, 10)
        self.assertEqual(timer.syncs, 1)
        self.assertEqual((m.time_us, m.min_us, m.max_us), (5.0, 1, 10))

    def test_wall_timer_measures_something(self):
        t = timing.WallTimer()
        samples = t.time_iterations(lambda: sum(range(1000)), 4)
        self.assertEqual(len(samples), 4)
        self.assertTrue(all(s > 0 for s in samples))

    def test_sleep_cycles(self):
        # 30 µs to enqueue an iteration, 10 iterations: 2·300 + 50 = 650 µs at 1500 cycles/µs
        self.assertEqual(timing.sleep_cycles(30.0, 10, 1500.0), 975000)
        # capped at 200 ms
        self.assertEqual(timing.sleep_cycles(1e6, 10, 1000.0), 200_000_000)
        self.assertEqual(timing.sleep_cycles(0.0, 10, 1000.0), 50_000)


if __name__ == "__main__":
    unittest.main()
