"""Packaging for toolpaper: metadata comes from settings.ini (nbdev 2 convention)."""
from configparser import ConfigParser
from setuptools import find_packages, setup

cfg = ConfigParser(delimiters=["="])
cfg.read("settings.ini", encoding="utf-8")
c = cfg["DEFAULT"]
setup(
    name=c["lib_name"],
    version=c["version"],
    description=c["description"],
    author=c["author"],
    license="Apache-2.0",
    python_requires=">=" + c["min_python"],
    packages=find_packages(include=[c["lib_path"], c["lib_path"] + ".*"]),
    include_package_data=True,
    install_requires=c["requirements"].split(),
    extras_require={"dev": c["dev_requirements"].split()},
    entry_points={
        "console_scripts": c["console_scripts"].split(),
        "nbdev": [f'{c["lib_path"]}={c["lib_path"]}._modidx:d'],
    },
    zip_safe=False,
)
