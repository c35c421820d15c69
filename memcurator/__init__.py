from memcurator.errors import MemcuratorError

__version__ = "0.1.0"
__all__ = ["MemcuratorError", "__version__"]
