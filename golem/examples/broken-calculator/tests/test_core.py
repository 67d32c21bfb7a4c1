import unittest

from calculator import add, divide, mean, power


class AddTest(unittest.TestCase):
    def test_adds_integers(self):
        self.assertEqual(add(2, 3), 5)

    def test_adds_negatives(self):
        self.assertEqual(add(-2, -3), -5)


class DivideTest(unittest.TestCase):
    def test_divides(self):
        self.assertEqual(divide(9, 3), 3)

    def test_zero_divisor_is_an_error(self):
        with self.assertRaises(ValueError):
            divide(1, 0)


class MeanTest(unittest.TestCase):
    def test_mean_of_three(self):
        self.assertEqual(mean([1, 2, 3]), 2)

    def test_mean_of_one(self):
        self.assertEqual(mean([4]), 4)

    def test_empty_is_an_error(self):
        with self.assertRaises(ValueError):
            mean([])


class PowerTest(unittest.TestCase):
    def test_square(self):
        self.assertEqual(power(3, 2), 9)

    def test_zero_exponent(self):
        self.assertEqual(power(5, 0), 1)

    def test_negative_exponent_is_an_error(self):
        with self.assertRaises(ValueError):
            power(2, -1)


if __name__ == "__main__":
    unittest.main()
