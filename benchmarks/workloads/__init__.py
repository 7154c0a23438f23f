"""One module per workload (W1-W13); each has ``run(ctx) -> list[Row]`` and a ``TITLE``."""

from . import (w1_add, w2_drain, w3_latency, w4_flat, w5_recovery, w6_steps, w7_repeating, w8_reads, w9_scale,
               w10_trips, w11_priorities, w12_bulk, w13_async)

ALL = {"W1": w1_add, "W2": w2_drain, "W3": w3_latency, "W4": w4_flat, "W5": w5_recovery, "W6": w6_steps,
       "W7": w7_repeating, "W8": w8_reads, "W9": w9_scale, "W10": w10_trips, "W11": w11_priorities,
       "W12": w12_bulk, "W13": w13_async}
