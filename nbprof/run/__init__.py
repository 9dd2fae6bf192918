"""The one Run (``runner``): a profiler around the user's code, begun and ended the same way for
every front end, and the flags that configure it (``flags``)."""
