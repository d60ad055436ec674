"""The training-speed benchmark's PyTorch baselines: the trainer's net (7,560 features
per view to 2 x 256, clipped ReLU, 32, 32, 1, quantisation-aware: activations and
dense weights rounded to the engine's steps going forward, straight through going
back) with the same loss, AdamW (weight decay on the weights only) and clipping as
xq-trainer, trained from the initial weights and on the batches of real positions that
`xq-trainer bench --save FILE` wrote.

Two styles of the same computation:
- plain: PyTorch as its tutorials write it: an EmbeddingBag called once per view,
  Linear layers, the rounding as `x + (round(x) - x).detach()`, AdamW's defaults.
- expert: written for speed on the CPU: both views of every sample through one CSR
  sparse matrix product (rows 2s and 2s + 1 are sample s's views, so the output is
  already [B, 512]; the matrix's transpose, for the backward, made beforehand as a
  data loader would), or through one embedding_bag call (--layer bag); the clipped,
  rounded activation as one autograd function whose backward is a mask; AdamW fused
  (foreach when fused is refused); the dense part under torch.compile (--no-compile
  to leave it off).

Usage: python bench_trainer_reference.py BATCHES.safetensors --style plain|expert
           [--steps 100] [--threads T] [--layer csr|bag] [--no-compile]
Prints one line: STYLE: N positions/s over STEPS timed steps of B cycling K distinct
batches (W warm-up steps); threads ...; loss: first step X, step W Y; and for the
expert, how it was built.
"""

import argparse
import os
import time
import warnings

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

FEATURES, L1, L2, L3 = 7560, 256, 32, 32
ACTIVATION_ONE, WEIGHT_ONE, OUTPUT_DIVISOR = 127.0, 64.0, 16.0
SUM_ONE = WEIGHT_ONE * ACTIVATION_ONE
CENTIPAWNS_PER_UNIT = SUM_ONE / OUTPUT_DIVISOR
# trainer/src/model.rs: a bias and 32 rows within i16 once quantised; i8 dense weights.
TRANSFORMER_LIMIT = (32767 / 33 - 0.5) / ACTIVATION_ONE
WEIGHT_LIMIT = 127 / WEIGHT_ONE
# trainer/src/bench.rs's settings.
SCALE, LAMBDA, RATE, WEIGHT_DECAY = 400.0, 0.75, 1e-3, 1e-4
WARMUP = 5
NAMES = ["ft.weight", "ft.bias", "h1.weight", "h1.bias", "h2.weight", "h2.bias", "out.weight", "out.bias"]


def read(path):
    """The saved batches, as (ours, theirs, offsets, scores, results), and the initial
    weights by name."""
    tensors = load_file(path)
    batches = []
    while f"ours.{len(batches)}" in tensors:
        i = len(batches)
        batches.append(tuple(tensors[f"{n}.{i}"] for n in ("ours", "theirs", "offsets", "scores", "results")))
    return batches, {name: tensors[f"init.{name}"] for name in NAMES}


def loss_of(predicted, scores, results):
    target = torch.sigmoid(scores / SCALE) * LAMBDA + results * (1 - LAMBDA)
    return ((torch.sigmoid(predicted / SCALE) - target) ** 2).mean()


def optimiser_of(parameters, **options):
    """AdamW with weight decay on the weights, not the biases, as xq-trainer's."""
    groups = [
        {"params": [p for n, p in parameters.items() if n.endswith("weight")], "weight_decay": WEIGHT_DECAY},
        {"params": [p for n, p in parameters.items() if n.endswith("bias")], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=RATE, **options)


@torch.no_grad()
def clip(parameters):
    """Every parameter into the range its quantisation holds."""
    for name, parameter in parameters.items():
        if name.startswith("ft."):
            parameter.clamp_(-TRANSFORMER_LIMIT, TRANSFORMER_LIMIT)
        elif name.endswith("weight"):
            parameter.clamp_(-WEIGHT_LIMIT, WEIGHT_LIMIT)


def rounded(x, scale):
    """x rounded to steps of 1 / scale going forward, x itself going backward."""
    return x + ((x * scale).round() / scale - x).detach()


class Plain(torch.nn.Module):
    def __init__(self, init):
        super().__init__()
        self.ft = torch.nn.EmbeddingBag(FEATURES, L1, mode="sum")
        self.ft_bias = torch.nn.Parameter(torch.empty(L1))
        self.h1 = torch.nn.Linear(2 * L1, L2)
        self.h2 = torch.nn.Linear(L2, L3)
        self.out = torch.nn.Linear(L3, 1)
        with torch.no_grad():
            for name, parameter in self.by_name().items():
                parameter.copy_(init[name])

    def by_name(self):
        return {
            "ft.weight": self.ft.weight,
            "ft.bias": self.ft_bias,
            **{f"{layer}.{kind}": getattr(getattr(self, layer), kind) for layer in ("h1", "h2", "out") for kind in ("weight", "bias")},
        }

    def forward(self, ours, theirs, offsets):
        def activation(x):
            return rounded(x.clamp(0, 1), ACTIVATION_ONE)

        def layer(x, linear):
            return F.linear(x, rounded(linear.weight, WEIGHT_ONE), rounded(linear.bias, SUM_ONE))

        x = torch.cat([activation(self.ft(ours, offsets) + self.ft_bias), activation(self.ft(theirs, offsets) + self.ft_bias)], dim=1)
        x = activation(layer(x, self.h1))
        x = activation(layer(x, self.h2))
        return layer(x, self.out).squeeze(1) * CENTIPAWNS_PER_UNIT


def plain(batches, init, _):
    net = Plain(init)
    parameters = net.by_name()
    optimiser = optimiser_of(parameters)

    def step(batch):
        ours, theirs, offsets, scores, results = batch
        loss = loss_of(net(ours, theirs, offsets), scores, results)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        clip(parameters)
        return loss.item()

    return step, batches, lambda: ""


class ClippedRound(torch.autograd.Function):
    """The clipped ReLU rounded to the engine's steps going forward; going back, the
    gradient where the clip let the value through (straight through the rounding)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward((x >= 0) & (x <= 1))
        return x.clamp(0, 1).mul_(ACTIVATION_ONE).round_().div_(ACTIVATION_ONE)

    @staticmethod
    def backward(ctx, gradient):
        (passes,) = ctx.saved_tensors
        return gradient * passes


def dense(sums, ft_b, h1_w, h1_b, h2_w, h2_b, out_w, out_b, scores, results):
    """The loss from the feature transformer's sums ([2B, 256], a sample's two views
    in rows 2s and 2s + 1) on."""
    x = ClippedRound.apply(sums + ft_b).view(-1, 2 * L1)
    x = ClippedRound.apply(F.linear(x, rounded(h1_w, WEIGHT_ONE), rounded(h1_b, SUM_ONE)))
    x = ClippedRound.apply(F.linear(x, rounded(h2_w, WEIGHT_ONE), rounded(h2_b, SUM_ONE)))
    predicted = F.linear(x, rounded(out_w, WEIGHT_ONE), rounded(out_b, SUM_ONE)).squeeze(1) * CENTIPAWNS_PER_UNIT
    return loss_of(predicted, scores, results)


def side_by_side(ours, theirs, offsets):
    """One index list holding each sample's two views in turn (ours, then theirs), and
    its bags' offsets: a view of a sample has as many features as the other."""
    total = ours.shape[0]
    lengths = torch.diff(offsets, append=torch.tensor([total]))
    sample = torch.repeat_interleave(torch.arange(offsets.shape[0]), lengths)
    at = torch.arange(total) + offsets[sample]
    indices = torch.empty(2 * total, dtype=ours.dtype)
    indices[at] = ours
    indices[at + lengths[sample]] = theirs
    return indices, torch.stack([2 * offsets, 2 * offsets + lengths], dim=1).flatten()


class SparseProduct(torch.autograd.Function):
    """A CSR matrix of ones (a bag per row) times the weights; going back, the
    gradient through the matrix's transpose, made once per batch beforehand (torch's
    own backward transposes it at every step)."""

    @staticmethod
    def forward(ctx, weights, features, transposed):
        ctx.transposed = transposed
        return features @ weights

    @staticmethod
    def backward(ctx, gradient):
        return ctx.transposed @ gradient, None, None


def expert(batches, init, options):
    parameters = {name: tensor.clone().requires_grad_() for name, tensor in init.items()}
    try:
        optimiser, adam = optimiser_of(parameters, fused=True), "fused"
    except (RuntimeError, ValueError) as error:
        optimiser, adam = optimiser_of(parameters, foreach=True), f"foreach (fused refused: {error})"
    prepared = []
    for ours, theirs, offsets, scores, results in batches:
        indices, bags = side_by_side(ours, theirs, offsets)
        if options.layer == "csr":
            rows = torch.cat([bags, torch.tensor([indices.shape[0]])])
            values = torch.ones(indices.shape[0])
            matrix = torch.sparse_csr_tensor(rows, indices, values, (bags.shape[0], FEATURES), check_invariants=False)
            features = (matrix, matrix.t().to_sparse_csr())
        else:
            features = (indices, bags)
        prepared.append((features, scores, results))
    ft_w, *rest = parameters.values()
    layer = "one CSR sparse product for both views" if options.layer == "csr" else "one embedding_bag for both views"
    built = {"dense": dense, "compile": "off (--no-compile)"}
    if options.compile:
        built.update(dense=torch.compile(dense, dynamic=False), compile="on (the dense part)")

    def attempt(batch):
        features, scores, results = batch
        if options.layer == "csr":
            sums = SparseProduct.apply(ft_w, *features)
        else:
            sums = F.embedding_bag(features[0], ft_w, features[1], mode="sum")
        loss = built["dense"](sums, *rest, scores, results)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        clip(parameters)
        return loss.item()

    def step(batch):
        try:
            return attempt(batch)
        except Exception as error:  # torch.compile fails in many ways; eager is the fallback
            if built["dense"] is dense:
                raise
            reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            built.update(dense=dense, compile=f"off (it failed: {reason})")
            return attempt(batch)

    return step, prepared, lambda: f"; sparse layer: {layer}; AdamW: {adam}; torch.compile: {built['compile']}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("batches")
    parser.add_argument("--style", choices=["plain", "expert"], required=True)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--layer", choices=["csr", "bag"], default="csr")
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    options = parser.parse_args()
    warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
    torch.set_num_threads(options.threads)
    torch.set_num_interop_threads(options.threads)
    batches, init = read(options.batches)
    step, prepared, described = {"plain": plain, "expert": expert}[options.style](batches, init, options)
    warmup = min(WARMUP, len(prepared))
    losses = [step(prepared[i]) for i in range(warmup)]
    started = time.perf_counter()
    positions = 0
    for i in range(options.steps):
        step(prepared[i % len(prepared)])
        positions += batches[i % len(batches)][3].shape[0]
    speed = positions / (time.perf_counter() - started)
    print(
        f"{options.style}: {speed:.0f} positions/s over {options.steps} timed steps of {batches[0][3].shape[0]} "
        f"cycling {len(batches)} distinct batches ({warmup} warm-up steps); "
        f"threads: torch {torch.get_num_threads()} intra-op, {torch.get_num_interop_threads()} inter-op; "
        f"loss: first step {losses[0]:.6f}, step {warmup} {losses[-1]:.6f}{described()}"
    )


if __name__ == "__main__":
    main()
