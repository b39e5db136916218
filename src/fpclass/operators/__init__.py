"""Operators (element-wise masks) and queries (fused reductions) on top of the kernels."""
