#!/usr/bin/env python3
"""Real-GPU check (device machine only): a small Llama with random weights (from a config,
nothing downloaded) generates tokens on the GPU, eagerly and then as CUDA graph replays.
Around each step it notes CLOCK_MONOTONIC times and torch.cuda event times; tokenscope, traced
at the same time, must rebuild one step per token with matching times.

usage: torch_steps.py TRUTH.json
"""
import json
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=8192, hidden_size=512, intermediate_size=1408,
                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                      max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).to("cuda", torch.float16).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 32), device="cuda")
    truth = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
             "eager": [], "graph": [], "async": []}

    def timed(phase, body):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        t0 = time.monotonic_ns()
        s.record()
        body()
        e.record()
        e.synchronize()
        t1 = time.monotonic_ns()
        truth[phase].append({"t0_ns": t0, "t1_ns": t1, "gpu_ms": s.elapsed_time(e)})

    with torch.inference_mode():
        model(ids)  # warm-up: allocator, cuBLAS, lazy module loading
        torch.cuda.synchronize()
        time.sleep(0.5)

        # phase: eager decode, one token per step, KV cache
        state = {"past": None, "next": ids}

        def decode():
            o = model(input_ids=state["next"], past_key_values=state["past"], use_cache=True)
            state["past"] = o.past_key_values
            state["next"] = o.logits[:, -1:].argmax(-1)

        for _ in range(48):
            timed("eager", decode)
            state["next"].item()
        time.sleep(0.5)

        # phase: the same forward as a CUDA graph
        static_in = torch.randint(0, cfg.vocab_size, (1, 16), device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(static_in)
        torch.cuda.synchronize()
        time.sleep(0.5)
        for _ in range(32):
            timed("graph", graph.replay)
        time.sleep(0.5)

        # phase: vLLM-style asynchronous scheduling: the sampled token is copied to pinned
        # memory on a side stream after it waits for the step, an event is recorded there,
        # the next step is launched, and only then does the host wait for the previous copy
        main = torch.cuda.current_stream()
        copy = torch.cuda.Stream()
        pinned = torch.empty((1, 1), dtype=torch.long, pin_memory=True)
        state = {"past": None, "next": ids[:, -1:]}
        pending = None
        for i in range(33):
            t0 = time.monotonic_ns()
            if i < 32:
                decode()
                t_launched = time.monotonic_ns()
                copy.wait_stream(main)
                with torch.cuda.stream(copy):
                    pinned.copy_(state["next"], non_blocking=True)
                    done = torch.cuda.Event()
                    done.record(copy)
            if pending is not None:
                pending["event"].synchronize()
                pending["row"]["seen_ns"] = time.monotonic_ns()
                truth["async"].append(pending["row"])
            if i < 32:
                pending = {"event": done, "row": {"t0_ns": t0, "t_launched_ns": t_launched}}
    with open(out, "w") as f:
        json.dump(truth, f)
    print(f"torch_steps: {len(truth['eager'])} eager, {len(truth['graph'])} graph and "
          f"{len(truth['async'])} async steps")


if __name__ == "__main__":
    main()
