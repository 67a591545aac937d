from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel


def parallel_plan(world_size: int) -> dict[str, ParallelStyle]:
    # Whole heads on every rank: the key/value heads are the fewest.
    if CONFIG.num_key_value_heads % world_size:
        raise ValueError(
            f"{CONFIG.num_key_value_heads} key/value heads cannot be split across {world_size} ranks"
        )
    return {
        "model.layers.*.self_attn.q_proj": ColwiseParallel(),
        "model.layers.*.self_attn.k_proj": ColwiseParallel(),
        "model.layers.*.self_attn.v_proj": ColwiseParallel(),
        "model.layers.*.self_attn.o_proj": RowwiseParallel(),
        "model.layers.*.mlp.gate_proj": ColwiseParallel(),
        "model.layers.*.mlp.up_proj": ColwiseParallel(),
        "model.layers.*.mlp.down_proj": RowwiseParallel(),
    }
