"""Build hook for the one thing pyproject.toml cannot declare stably: the optional compiled extension.

collectors/gnmi/counters/native.pyx (Cython) holds the collector's hot loops. ``optional=True``: without a C
compiler the install warns and goes on, and the collector runs the same rules on numpy.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("flowtracer.collectors.gnmi.counters.native", ["collectors/gnmi/counters/native.pyx"],
                             optional=True)])
