from sparkfield.core.spark_ui import _error_line

PYTHON = ("org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
          '  File "worker.py", line 3386, in main\n    process()\n'
          "sparkfield.core.faults.InjectedFailure: injected failure at geo.tiles (marker m)\n"
          "\n\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(x.scala:1)"
          "\n\tat scala.collection.Iterator.foreach(Iterator.scala:1)")


def test_error_line_is_the_python_exception_without_the_jvm_stack():
    assert _error_line(PYTHON) == ("sparkfield.core.faults.InjectedFailure: injected failure "
                                   "at geo.tiles (marker m)")


def test_error_line_of_a_jvm_error_is_its_first_line():
    msg = ("java.io.FileNotFoundException: /x/part-0 (No such file)\n"
           "\tat java.base/java.io.FileInputStream.open0(Native Method)")
    assert _error_line(msg) == "java.io.FileNotFoundException: /x/part-0 (No such file)"
    assert _error_line("") == "(no message)"
