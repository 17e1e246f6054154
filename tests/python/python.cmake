# The relaxc Python package (python/, docs/python.md; issue 34): ctest python.package runs
# tests/python/run_test.py, which makes the venv BUILD/venv-python (scripts/python-venv.sh, pinned
# packages from PyPI), pip-installs ./python into it (scikit-build-core compiling librelaxc in
# BUILD/python-pkg, kept between runs), builds and checks the wheel, installs it, and runs
# tests/python/test_relaxc.py against NumPy references and `relaxc generate` on lavapipe.
# Included by tests/CMakeLists.txt. Not in the sanitized build: the package's librelaxc is its own
# Release build, and preloading ASan into Python (the sanitized environment) would test nothing
# of relaxc that the other tests do not.
if(NOT RX_SANITIZE)
  set(RX_PY_ENV ${RX_RT_VK_ENV})
  list(FILTER RX_PY_ENV EXCLUDE REGEX "^LD_PRELOAD=")
  add_test(NAME python.package
           COMMAND ${RX_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/python/run_test.py
                   --root ${CMAKE_SOURCE_DIR} --build ${CMAKE_BINARY_DIR}
                   --relaxc $<TARGET_FILE:relaxc> --prefix "${RX_TEST_RUN_PREFIX}")
  # seconds on 2 cores: about 100 with librelaxc already compiled in BUILD/python-pkg, and two
  # minutes more the first time (a fresh build folder, as in CI)
  set_tests_properties(python.package PROPERTIES ENVIRONMENT "${RX_PY_ENV}"
                       LABELS "python;vulkan" TIMEOUT 900 COST 220)
endif()
