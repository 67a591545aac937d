from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel


def parallel_plan(world_size: int) -> dict[str, ParallelStyle]:
    return {"0": ColwiseParallel(), "2": RowwiseParallel()}
