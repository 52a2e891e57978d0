"""ctindex package."""
