"""Top-p distributions, matrices and HMMs: ``pipeline.methods.topp`` under its short name."""

from pipeline.methods.topp import TOLERANCE, kept_mass, topp_hmm, topp_matrix, topp_vector

__all__ = ["TOLERANCE", "kept_mass", "topp_hmm", "topp_matrix", "topp_vector"]
