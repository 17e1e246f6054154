# The relaxc Python package (python/, docs/python.md; issue 34): ctest python.package runs
# tests/python/run_test.py, which makes the venv BUILD/venv-python (scripts/python-venv.sh, pinned
# packages from PyPI), pip-installs ./python into it, builds and checks the wheel, installs it, and
# runs tests/python/test_relaxc.py against NumPy references and `relaxc generate` on lavapipe.
# The package takes this build tree's librelaxc (--lib: RX_PY_PREBUILT_LIB, python/package.cmake)
# instead of compiling it again in Release (2 to 6 minutes on 2 cores: CI has no time for it); the
# from-source build of a plain `pip install ./python` is the manual check
# `run_test.py --from-source` (docs/python.md, "Tests").
# Included by tests/CMakeLists.txt. Not in the sanitized build: the build tree's librelaxc is
# sanitized there, and preloading ASan into Python would test nothing of relaxc that the other
# tests do not.
if(NOT RX_SANITIZE)
  set(RX_PY_ENV ${RX_RT_VK_ENV})
  list(FILTER RX_PY_ENV EXCLUDE REGEX "^LD_PRELOAD=")
  add_test(NAME python.package
           COMMAND ${RX_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/python/run_test.py
                   --root ${CMAKE_SOURCE_DIR} --build ${CMAKE_BINARY_DIR}
                   --relaxc $<TARGET_FILE:relaxc> --lib $<TARGET_FILE:relaxc_shared>
                   --prefix "${RX_TEST_RUN_PREFIX}")
  # seconds on 2 cores: see docs/python.md, "Tests" (COST: the order ctest -j starts tests in)
  set_tests_properties(python.package PROPERTIES ENVIRONMENT "${RX_PY_ENV}"
                       LABELS "python;vulkan" TIMEOUT 600 COST 100)
endif()
