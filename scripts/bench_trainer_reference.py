"""The training-speed benchmark's reference: a plain PyTorch loop of the engine's net
(embedding bag 7,560 x 256 per side, shared by both views, clipped ReLU, 32, 32, 1),
with the same loss, optimiser and clipping as xq-trainer, on the batches that
`xq-trainer bench --save FILE` wrote from real chunks.

Usage: python bench_trainer_reference.py BATCHES.safetensors STEPS
Prints: reference: N positions/s over STEPS steps of B
"""

import sys
import time

import torch
from safetensors.torch import load_file

FEATURES, L1, L2, L3 = 7560, 256, 32, 32
CENTIPAWNS_PER_UNIT = 64 * 127 / 16
SCALE, LAMBDA = 400.0, 0.75


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ft = torch.nn.EmbeddingBag(FEATURES, L1, mode="sum")
        self.ft_bias = torch.nn.Parameter(torch.full((L1,), 0.5))
        self.h1 = torch.nn.Linear(2 * L1, L2)
        self.h2 = torch.nn.Linear(L2, L3)
        self.out = torch.nn.Linear(L3, 1)

    def forward(self, ours, theirs, offsets):
        a = (self.ft(ours, offsets) + self.ft_bias).clamp(0, 1)
        b = (self.ft(theirs, offsets) + self.ft_bias).clamp(0, 1)
        x = torch.cat([a, b], dim=1)
        x = self.h1(x).clamp(0, 1)
        x = self.h2(x).clamp(0, 1)
        return self.out(x).squeeze(1) * CENTIPAWNS_PER_UNIT


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    tensors = load_file(path)
    batches = []
    while f"ours.{len(batches)}" in tensors:
        i = len(batches)
        batches.append(tuple(tensors[f"{n}.{i}"] for n in ("ours", "theirs", "offsets", "scores", "results")))
    torch.manual_seed(1)
    net = Net()
    optimiser = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-4)
    limit_ft = (32767 / 33 - 0.5) / 127
    limit_dense = 127 / 64

    def step(batch):
        ours, theirs, offsets, scores, results = batch
        predicted = net(ours, theirs, offsets)
        target = torch.sigmoid(scores / SCALE) * LAMBDA + results * (1 - LAMBDA)
        loss = ((torch.sigmoid(predicted / SCALE) - target) ** 2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        with torch.no_grad():
            net.ft.weight.clamp_(-limit_ft, limit_ft)
            net.ft_bias.clamp_(-limit_ft, limit_ft)
            for layer in (net.h1, net.h2, net.out):
                layer.weight.clamp_(-limit_dense, limit_dense)
        return loss.item()

    for i in range(min(5, len(batches))):
        step(batches[i])
    started = time.perf_counter()
    positions = 0
    for i in range(steps):
        batch = batches[i % len(batches)]
        step(batch)
        positions += batch[3].shape[0]
    speed = positions / (time.perf_counter() - started)
    print(f"reference: {speed:.0f} positions/s over {steps} steps of {batches[0][3].shape[0]}")


if __name__ == "__main__":
    main()
